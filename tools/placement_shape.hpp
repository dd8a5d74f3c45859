// optireduce-info --placement: the shape OPTIREDUCE_HIERARCHY picks for a placement the user
// names (the hosts of a job are known only inside it), why, its slices and each host's link bytes.
#pragma once

#include <string>
#include <vector>

#include "optireduce/engine/config/engine_options.hpp"

namespace optireduce::tools {

struct PlacementShape {
  std::string placement;             // "3+2+2"
  bool hierarchical = false;
  std::string reason;
  std::vector<std::string> slices;   // "slice [1/3, 1/2): ranks 1, 3"
  double flat_link_share = 0;        // bytes out of the busiest host's link per byte of buffer, flat TAR
  double link_share = 0;             // the same for the shape picked
  // What a reduce-scatter of even blocks takes there, and the busiest host link's bytes out per
  // byte of buffer, flat and in the shape it takes.
  std::string reduce_scatter;
  double scatter_flat_link_share = 0, scatter_link_share = 0;
  std::string error;                 // set when the text is not a placement
};

// `text`: ranks per host, comma-separated, e.g. "3,2,2" (hosts filled in order).
PlacementShape describe_placement(const std::string& text, HierarchyMode mode);

}  // namespace optireduce::tools
