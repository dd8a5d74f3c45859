// What a seed's placement means for its calls (fault_schedule.hpp: seeds from kPlacedSeeds on put
// several ranks on some hosts): the hosts and slices of its three-stage calls, as the engine cuts
// them (hierarchy/slice_map.hpp), so the run can check each call against the three stages'
// semantics: inside a host the sum is exact, so an entry lacks whole hosts' partial sums or
// nothing; each slice's exchange is an engine of its own, whose kind its holders share.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "fault_schedule.hpp"
#include "optireduce/engine/hierarchy/placement.hpp"
#include "optireduce/engine/hierarchy/slice_map.hpp"
#include "optireduce/elements/format.hpp"

namespace optireduce::schedules {

class HostView {
 public:
  explicit HostView(const FaultSchedule& schedule);
  // Host names of their own per seed (the segments' names come from them and the engine's id).
  const Placement& placement() const { return placement_; }
  const SliceMap& slices() const { return slices_; }

  // Whether a result entry that holds the contributions of the ranks in `mask` (bit r: rank r) is
  // one the call may give: any subset for a flat call; in three stages, whole hosts only.
  bool possible_subset(unsigned mask, bool three_stages) const;

  // One call's slices in three stages: each one's elements, the first slice with elements of each
  // rank (-1: none; its report's kind is that exchange's), and the most exchanges a rank runs one
  // after another.
  struct CallSlices {
    std::vector<ElementRange> ranges;
    std::vector<int> first_of_rank;
    int longest_chain = 1;
    // The slice that holds entry `i` of the whole buffer.
    int slice_of(std::uint64_t i) const;
  };
  CallSlices call_slices(std::uint64_t count, ElementFormat format) const;

 private:
  Placement placement_;
  SliceMap slices_;
  std::vector<unsigned> host_masks_;
};

}  // namespace optireduce::schedules
