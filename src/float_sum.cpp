#include "optireduce/engine/float_sum.hpp"

#include <algorithm>

namespace optireduce {
namespace {

// A block stays in L1 while every source is added to it.
constexpr std::size_t kBlock = 1024;

}  // namespace

// The engine builds at -O2, which leaves these loops scalar (and copies with rep movs); this file
// builds at -O3.
__attribute__((target_clones("avx512f", "avx2", "default")))
void sum_in_order(const float* const* sources, int count, float* out, float* also, std::size_t n) {
  alignas(64) float acc[kBlock];
  for (std::size_t b = 0; b < n; b += kBlock) {
    const std::size_t m = std::min(kBlock, n - b);
    const float* __restrict first = sources[0] + b;
    if (count == 1) {
      for (std::size_t i = 0; i < m; ++i) acc[i] = first[i];
    } else {
      const float* __restrict second = sources[1] + b;
      for (std::size_t i = 0; i < m; ++i) acc[i] = first[i] + second[i];
    }
    for (int k = 2; k < count; ++k) {
      const float* __restrict src = sources[k] + b;
      for (std::size_t i = 0; i < m; ++i) acc[i] += src[i];
    }
    float* __restrict dst = out + b;
    for (std::size_t i = 0; i < m; ++i) dst[i] = acc[i];
    if (!also) continue;
    float* __restrict dst2 = also + b;
    for (std::size_t i = 0; i < m; ++i) dst2[i] = acc[i];
  }
}

}  // namespace optireduce
