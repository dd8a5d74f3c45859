#include "optireduce/engine/hierarchy/shape.hpp"

#include <algorithm>
#include <cstdio>

#include "optireduce/engine/hierarchy/slice_map.hpp"

namespace optireduce {

ShapeChoice choose_shape(const Placement& p, HierarchyMode mode) {
  const int n = p.ranks(), hosts = p.hosts();
  int most = 0;
  for (int h = 0; h < hosts; ++h) most = std::max(most, p.ranks_on(h));
  if (mode == HierarchyMode::off) return {false, "OPTIREDUCE_HIERARCHY=off: one flat TAR over all " + std::to_string(n) + " ranks"};
  if (n <= 1) return {false, "one rank: nothing to exchange"};
  if (hosts == 1) return {false, "every rank on one host: the flat call inside the host, as without hierarchy"};
  if (most == 1) return {false, "one rank per host: the flat TAR already sends each host's share only"};
  double worst_flat = 0;
  for (int h = 0; h < hosts; ++h) worst_flat = std::max(worst_flat, flat_link_bytes(p, h, 1.0));
  const auto map = map_slices(p);
  char share[128];
  std::snprintf(share, sizeof share, "%.2f x B out and as much in per call of B bytes (the flat TAR: up to %.2f x B)",
                hierarchical_link_bytes(p, 1.0), worst_flat);
  return {true, std::to_string(hosts) + " hosts with " + p.counts_text() +
                    " ranks: reduce-scatter and all-gather over shared memory inside each host, " +
                    std::to_string(map.slices.size()) + " bounded exchanges of " + std::to_string(hosts) +
                    " ranks across hosts; each host's link carries " + share};
}

double flat_link_bytes(const Placement& p, int host, double bytes) {
  // Each of the host's L ranks sends (N - L)/N of its buffer to the other hosts' ranks in the
  // scatter-reduce, and as much of its reduced shard in the all-gather.
  const double n = p.ranks(), local = p.ranks_on(host);
  return 2 * local * (n - local) / n * bytes;
}

double hierarchical_link_bytes(const Placement& p, double bytes) {
  const double hosts = p.hosts();
  return 2 * (hosts - 1) / hosts * bytes;
}

}  // namespace optireduce
