#include "optireduce/elements/convert.hpp"

#include "optireduce/cpu_features.hpp"
#include "optireduce/elements/kernels.hpp"
#include "optireduce/enumerator_name.hpp"

namespace optireduce {

using namespace elements_detail;

const char* to_string(ConvertLevel level) { return enumerator_name(level, {"scalar", "f16c", "avx512"}); }

namespace {

const KernelLevels<ConvertLevel, Kernels>& levels() {
  static const KernelLevels<ConvertLevel, Kernels> levels(cpu_features().avx2 && cpu_features().f16c,
                                                          cpu_features().avx512f && cpu_features().avx512bw,
                                                          scalar_kernels(), vector_kernels<8>(), vector_kernels<16>());
  return levels;
}

}  // namespace

ConvertLevel best_convert_level() { return levels().best(); }

void widen(ElementFormat format, const void* in, float* out, std::size_t n, ConvertLevel level) {
  levels().at(level).widen(format, in, out, n);
}

void narrow(ElementFormat format, const float* in, void* out, std::size_t n, ConvertLevel level) {
  levels().at(level).narrow(format, in, out, n);
}

void sum_widened(const WidenedSum& sum, std::size_t n, ConvertLevel level) { levels().at(level).sum_widened(sum, n); }

}  // namespace optireduce
