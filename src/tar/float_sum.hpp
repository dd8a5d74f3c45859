// The sums the scatter-reduce computes, element by element. Built with vectorization on and one
// clone per SIMD level (the loader picks the CPU's): vector lanes add the same floats a scalar
// loop would, in the same order, so every level gives the same bits.
#pragma once

#include <cstddef>

namespace optireduce {

// out[i] = ((sources[0][i] + sources[1][i]) + sources[2][i]) + ... for i < n, over `count` >= 1
// sources of floats, written to `out` and, unless null, to `also` as well. A source may sit at any
// byte address (a transport's receive buffer packs headers and payloads back to back), and may be
// `out` or `also` itself (it is read, block by block, before it is written).
void sum_in_order(const void* const* sources, int count, float* out, float* also, std::size_t n);

}  // namespace optireduce
