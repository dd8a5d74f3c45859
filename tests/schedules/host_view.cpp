#include "host_view.hpp"

#include <algorithm>

#include "optireduce/engine/hierarchy/host_sum.hpp"

namespace optireduce::schedules {

namespace {

Placement placement_of(const FaultSchedule& s) {
  std::vector<std::string> names;
  for (int r = 0; r < s.ranks; ++r) names.push_back("seed" + std::to_string(s.seed) + "-h" + std::to_string(s.host_of(r)));
  return placement_from_names(names);
}

}  // namespace

HostView::HostView(const FaultSchedule& schedule) : placement_(placement_of(schedule)), slices_(map_slices(placement_)) {
  for (const auto& ranks : placement_.ranks_of_host) {
    unsigned mask = 0;
    for (int r : ranks) mask |= 1u << r;
    host_masks_.push_back(mask);
  }
}

bool HostView::possible_subset(unsigned mask, bool three_stages) const {
  if (!three_stages) return true;
  return std::all_of(host_masks_.begin(), host_masks_.end(), [&](unsigned host) { return (mask & host) == 0 || (mask & host) == host; });
}

HostView::CallSlices HostView::call_slices(std::uint64_t count, ElementFormat format) const {
  CallSlices out;
  for (int s = 0; s < static_cast<int>(slices_.slices.size()); ++s)
    out.ranges.push_back(slices_.elements_of(s, static_cast<std::size_t>(count), host_granule(format)));
  for (int r = 0; r < placement_.ranks(); ++r) {
    int first = -1, chain = 0;
    for (int s : slices_.slices_of(r))
      if (out.ranges[static_cast<std::size_t>(s)].size() != 0) {
        if (first < 0) first = s;
        ++chain;
      }
    out.first_of_rank.push_back(first);
    out.longest_chain = std::max(out.longest_chain, chain);
  }
  return out;
}

int HostView::CallSlices::slice_of(std::uint64_t i) const {
  for (std::size_t s = 0; s < ranges.size(); ++s)
    if (i >= ranges[s].begin && i < ranges[s].end) return static_cast<int>(s);
  return -1;
}

}  // namespace optireduce::schedules
