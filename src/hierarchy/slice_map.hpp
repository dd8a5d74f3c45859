// Which rank reduces which slice of the buffer inside its host, and which ranks exchange each
// slice across hosts, for any placement (docs/design.md, "Many ranks per host").
//
// Each host cuts the buffer into as many equal ranges as it has ranks; its j-th rank reduces the
// j-th range over shared memory. The slices are the pieces between every host's cuts together
// (3 + 2 ranks: cuts at 1/3, 1/2, 2/3, four slices), so each slice lies in one range of every host,
// and its holders, one per host, exchange it over the network. Every host holds every slice once:
// each host's link carries 2·B·(H−1)/H per call whatever its number of ranks, and each rank
// reduces 1/L of the buffer within its host of L ranks.
#pragma once

#include <cstddef>
#include <vector>

#include "optireduce/engine/hierarchy/buffer_point.hpp"
#include "optireduce/engine/hierarchy/placement.hpp"

namespace optireduce {

struct ElementRange {
  std::size_t begin = 0, end = 0;
  std::size_t size() const { return end - begin; }
};

struct SliceExchange {
  BufferPoint begin, end;  // the slice, as shares of the buffer
  std::vector<int> ranks;  // its holder on every host, by host number: the ranks of its cross-host exchange
};

struct SliceMap {
  std::vector<SliceExchange> slices;  // in buffer order, from 0 to 1

  // The slices a rank holds: consecutive, in buffer order (none for a rank outside the placement).
  std::vector<int> slices_of(int rank) const;
  // A slice's elements in a buffer of `elements` cut at multiples of `granule`; empty when the
  // buffer is too short for it (its exchange then has nothing to do).
  ElementRange elements_of(int slice, std::size_t elements, std::size_t granule) const;
};

SliceMap map_slices(const Placement& placement);

// The range the local_index-th of a host's `local_ranks` reduces inside the host.
ElementRange local_range(int local_index, int local_ranks, std::size_t elements, std::size_t granule);

}  // namespace optireduce
