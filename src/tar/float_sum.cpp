#include "optireduce/engine/tar/float_sum.hpp"

#include <algorithm>

namespace optireduce {
namespace {

// A block stays in L1 while every source is added to it.
constexpr std::size_t kBlock = 1024;

// A float that may sit at any byte address: the compiler then emits unaligned loads only.
typedef float unaligned_float __attribute__((aligned(1)));

const unaligned_float* at(const void* source, std::size_t offset) { return static_cast<const unaligned_float*>(source) + offset; }

}  // namespace

// The engine builds at -O2, which leaves these loops scalar (and copies with rep movs); this file
// builds at -O3. The block goes through `acc`, a local array nothing else can alias, so a source
// may also be a destination.
__attribute__((target_clones("avx512f", "avx2", "default")))
void sum_in_order(const void* const* sources, int count, float* out, float* also, std::size_t n) {
  alignas(64) float acc[kBlock];
  for (std::size_t b = 0; b < n; b += kBlock) {
    const std::size_t m = std::min(kBlock, n - b);
    const unaligned_float* first = at(sources[0], b);
    if (count == 1) {
      for (std::size_t i = 0; i < m; ++i) acc[i] = first[i];
    } else {
      const unaligned_float* second = at(sources[1], b);
      for (std::size_t i = 0; i < m; ++i) acc[i] = first[i] + second[i];
    }
    for (int k = 2; k < count; ++k) {
      const unaligned_float* src = at(sources[k], b);
      for (std::size_t i = 0; i < m; ++i) acc[i] += src[i];
    }
    float* dst = out + b;
    for (std::size_t i = 0; i < m; ++i) dst[i] = acc[i];
    if (!also) continue;
    float* dst2 = also + b;
    for (std::size_t i = 0; i < m; ++i) dst2[i] = acc[i];
  }
}

}  // namespace optireduce
