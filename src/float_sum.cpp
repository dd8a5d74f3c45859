#include "optireduce/engine/float_sum.hpp"

namespace optireduce {

// The engine builds at -O2, which leaves this loop scalar; this file builds at -O3.
__attribute__((target_clones("avx512f", "avx2", "default")))
void add_into(float* __restrict acc, const float* __restrict src, std::size_t n) {
  for (std::size_t i = 0; i < n; ++i) acc[i] += src[i];
}

}  // namespace optireduce
