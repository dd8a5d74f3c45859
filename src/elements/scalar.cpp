// The conversions built for the scalar level (flags in CMakeLists.txt): the reference.
#include "optireduce/elements/kernels.hpp"

namespace optireduce::elements_detail {
namespace {

struct ScalarLanes {
  static std::size_t widen(ElementFormat, const void*, float*, std::size_t) { return 0; }
  static std::size_t narrow(ElementFormat, const float*, void*, std::size_t) { return 0; }
  static std::size_t sum(const WidenedSum&, std::size_t) { return 0; }
};

}  // namespace

Kernels scalar_kernels() { return kernels_of<ScalarLanes>(); }

}  // namespace optireduce::elements_detail
