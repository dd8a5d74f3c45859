// How a host sums its local ranks' parts of one range in the reduce-scatter inside it
// (host_stages.hpp), for each element format: float32 in float32, in local-rank order; float16
// and bfloat16 widened to float32, added in local-rank order and rounded once to the format
// (elements/convert.hpp: sum_widened, the owner's sum of the flat call). The same bits whichever
// rank computes them, and on every level of the CPU's kernels.
#pragma once

#include <cstddef>
#include <vector>

#include "optireduce/elements/format.hpp"

namespace optireduce {

// out[i] = parts[0][i] + parts[1][i] + ... for i < n, `parts` in local-rank order (at least one),
// each `n` elements of `format` from its range's start. `out` may be none of the parts.
void sum_host_parts(ElementFormat format, const std::vector<const void*>& parts, void* out, std::size_t n);

// The multiple of which every cut of a three-stage call falls on, in elements of `format`: a cache
// line, so no two local ranks write one line of the shared result area, and never inside an element.
constexpr std::size_t host_granule(ElementFormat format) { return 64 / element_bytes(format); }

}  // namespace optireduce
