// The transform's kernels built for the scalar level (flags in CMakeLists.txt): the reference.
#include "optireduce/hadamard/kernels.hpp"

namespace optireduce::hadamard_detail {

Kernels scalar_kernels() {
  return {&reference::encode_blocks, &reference::decode_blocks, &reference::encode_one, &reference::decode_one};
}

}  // namespace optireduce::hadamard_detail
