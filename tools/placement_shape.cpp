#include "placement_shape.hpp"

#include <algorithm>
#include <sstream>

#include "optireduce/engine/hierarchy/scatter_map.hpp"
#include "optireduce/engine/hierarchy/shape.hpp"
#include "optireduce/engine/hierarchy/slice_map.hpp"

namespace optireduce::tools {
namespace {

constexpr int kMaxHosts = 4096, kMaxRanksPerHost = 1024;

std::string share_text(BufferPoint p) {
  if (p.num == 0) return "0";
  if (p.num == p.den) return "1";
  return std::to_string(p.num) + "/" + std::to_string(p.den);
}

}  // namespace

PlacementShape describe_placement(const std::string& text, HierarchyMode mode) {
  PlacementShape out;
  std::vector<int> counts;
  std::stringstream in(text);
  std::string item;
  while (std::getline(in, item, ',')) {
    const bool digits = !item.empty() && item.size() <= 5 && item.find_first_not_of("0123456789") == std::string::npos;
    const int n = digits ? std::stoi(item) : 0;
    if (n < 1 || n > kMaxRanksPerHost) {
      out.error = "--placement \"" + text + "\": \"" + item + "\" is not a number of ranks from 1 to " +
                  std::to_string(kMaxRanksPerHost) + "; accepted: ranks per host, comma-separated, e.g. 3,2,2";
      return out;
    }
    counts.push_back(n);
  }
  if (counts.empty() || counts.size() > kMaxHosts || text.back() == ',') {
    out.error = "--placement \"" + text + "\" is not a list of 1 to " + std::to_string(kMaxHosts) +
                " hosts; accepted: ranks per host, comma-separated, e.g. 3,2,2";
    return out;
  }
  const Placement p = placement_from_counts(counts);
  const ShapeChoice choice = choose_shape(p, mode);
  out.placement = p.counts_text();
  out.hierarchical = choice.hierarchical;
  out.reason = choice.reason;
  for (int h = 0; h < p.hosts(); ++h) out.flat_link_share = std::max(out.flat_link_share, flat_link_bytes(p, h, 1.0));
  out.link_share = choice.hierarchical ? hierarchical_link_bytes(p, 1.0) : out.flat_link_share;
  // A reduce-scatter of even blocks: flat, each of a host's L of N ranks sends (N - L)/N of its
  // buffer across; in three stages the host sends the part its ranks do not own, (N - L)/N.
  const std::string scatter_reason = reduce_scatter_flat_reason(p);
  const bool scatter_tiered = choice.hierarchical && scatter_reason.empty();
  for (int h = 0; h < p.hosts(); ++h) {
    const double n = p.ranks(), local = p.ranks_on(h);
    out.scatter_flat_link_share = std::max(out.scatter_flat_link_share, local * (n - local) / n);
    out.scatter_link_share = std::max(out.scatter_link_share, (n - local) / n);
  }
  if (!scatter_tiered) out.scatter_link_share = out.scatter_flat_link_share;
  out.reduce_scatter = scatter_tiered ? "three stages too, where every host's ranks own part of the call"
                       : choice.hierarchical ? "flat: " + scatter_reason
                                             : "flat, as every call";
  if (choice.hierarchical)
    for (const auto& s : map_slices(p).slices) {
      std::string ranks;
      for (int r : s.ranks) ranks += (ranks.empty() ? "" : ", ") + std::to_string(r);
      out.slices.push_back("slice [" + share_text(s.begin) + ", " + share_text(s.end) + "): ranks " + ranks);
    }
  return out;
}

}  // namespace optireduce::tools
