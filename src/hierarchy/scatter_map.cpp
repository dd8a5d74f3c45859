#include "optireduce/engine/hierarchy/scatter_map.hpp"

#include <algorithm>

namespace optireduce {

std::string reduce_scatter_flat_reason(const Placement& placement) {
  int next = 0;
  for (int h = 0; h < placement.hosts(); ++h)
    for (int rank : placement.ranks_of_host[static_cast<std::size_t>(h)]) {
      if (rank != next)
        return "the ranks of host " + placement.host_names[static_cast<std::size_t>(h)] +
               " are not consecutive in the communicator (rank " + std::to_string(next) +
               " comes between them): their blocks are not one range of the buffer, so reduce-scatters stay flat";
      ++next;
    }
  return {};
}

std::vector<std::uint64_t> host_part_bounds(const Placement& placement, std::span<const std::uint64_t> blocks) {
  std::vector<std::uint64_t> bounds(static_cast<std::size_t>(placement.hosts()) + 1, 0);
  for (int h = 0; h < placement.hosts(); ++h) {
    std::uint64_t part = 0;
    for (int rank : placement.ranks_of_host[static_cast<std::size_t>(h)]) part += blocks[static_cast<std::size_t>(rank)];
    bounds[static_cast<std::size_t>(h) + 1] = bounds[static_cast<std::size_t>(h)] + part;
  }
  return bounds;
}

std::string empty_part_reason(const std::vector<std::uint64_t>& bounds) {
  for (std::size_t h = 0; h + 1 < bounds.size(); ++h)
    if (bounds[h + 1] == bounds[h])
      return "the ranks of host " + std::to_string(h) +
             " own no element of the call: that host would only send, and nothing would hold it to the others' pace, so "
             "such a reduce-scatter stays flat";
  return {};
}

std::vector<std::uint64_t> slice_blocks(ElementRange slice, const std::vector<std::uint64_t>& bounds) {
  std::vector<std::uint64_t> counts(bounds.size() - 1, 0);
  for (std::size_t h = 0; h + 1 < bounds.size(); ++h) {
    const std::uint64_t from = std::max<std::uint64_t>(slice.begin, bounds[h]);
    const std::uint64_t to = std::min<std::uint64_t>(slice.end, bounds[h + 1]);
    counts[h] = to > from ? to - from : 0;
  }
  return counts;
}

}  // namespace optireduce
