// Where a reduce-scatter's blocks fall among the slices of the three-stage call (docs/design.md,
// "Reduce-scatters in three stages"): which placements it serves, and for each slice how many of
// its elements each host's holder receives in the slice's exchange across hosts.
//
// A reduce-scatter gives rank p the sum of its block (the p-th of the blocks laid end to end).
// Where each host's ranks are consecutive in the communicator, the blocks of host h's ranks form
// one range of the buffer, its part, and the parts follow each other in host order. A slice then
// meets the parts in host order too, so its exchange is itself a reduce-scatter among its holders
// (one per host, in host order) whose h-th block is the slice's piece of host h's part: the
// engine's reduce-scatter with per-rank blocks (empty ones allowed). Each host sends out B − B_h
// and receives (H−1)·B_h (B_h its part): B·(H−1)/H each way where the parts are even.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "optireduce/engine/hierarchy/placement.hpp"
#include "optireduce/engine/hierarchy/slice_map.hpp"

namespace optireduce {

// Empty where the three stages can serve this placement's reduce-scatters; else why not (one
// sentence: the calls stay flat). The same on every rank: the placement is.
std::string reduce_scatter_flat_reason(const Placement& placement);

// Where each host's part begins and ends: H + 1 element offsets (part h is [bounds[h],
// bounds[h+1])), for a placement the three stages serve and one block per rank.
std::vector<std::uint64_t> host_part_bounds(const Placement& placement, std::span<const std::uint64_t> blocks);

// Empty where every host's part holds at least one element; else why the call stays flat (a host
// whose ranks own nothing would only send, and nothing would hold it to the others' pace).
std::string empty_part_reason(const std::vector<std::uint64_t>& bounds);

// The blocks of a slice's exchange: per host, the elements of `slice` that fall in its part
// (they tile the slice in host order).
std::vector<std::uint64_t> slice_blocks(ElementRange slice, const std::vector<std::uint64_t>& bounds);

}  // namespace optireduce
