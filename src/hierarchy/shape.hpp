// Which shape a call takes for a placement (OPTIREDUCE_HIERARCHY), why, and what each shape puts
// on a host's link: the flat TAR over every rank, or the three stages (reduce-scatter inside each
// host, one bounded exchange per slice across hosts, all-gather inside each host).
#pragma once

#include <string>

#include "optireduce/engine/config/engine_options.hpp"
#include "optireduce/engine/hierarchy/placement.hpp"

namespace optireduce {

struct ShapeChoice {
  bool hierarchical = false;
  std::string reason;  // one sentence, for optireduce-info and the report
};

// The same on every rank: the placement and the mode are.
ShapeChoice choose_shape(const Placement& placement, HierarchyMode mode);

// Payload bytes that leave one host over its link in one call on `bytes` (as many enter it):
// the flat TAR sends every rank's share to every rank of the other hosts; the three stages send
// each slice once from each host.
double flat_link_bytes(const Placement& placement, int host, double bytes);
double hierarchical_link_bytes(const Placement& placement, double bytes);

}  // namespace optireduce
