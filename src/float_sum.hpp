// The sums the scatter-reduce computes, element by element. Built with vectorization on and one
// clone per SIMD level (the loader picks the CPU's): vector lanes add the same two floats a
// scalar loop would, in the same order, so every level gives the same bits.
#pragma once

#include <cstddef>

namespace optireduce {

// acc[i] += src[i] for i < n; the two do not overlap.
void add_into(float* __restrict acc, const float* __restrict src, std::size_t n);

}  // namespace optireduce
