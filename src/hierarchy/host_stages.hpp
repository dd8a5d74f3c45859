// The exact stages of a three-stage call inside one host, over its HostSegment: a reduce-scatter
// (every local rank puts its buffer in its slot; each sums its own range over every slot, in
// local-rank order) and an all-gather (each puts its fully reduced range in the result area; every
// rank copies the whole result). float32. Every wait is bounded by the call's deadline.
//
// Reuse without a barrier of its own: a rank writes its slot for call g only once every local
// rank has finished call g-1's reduction (counter 1 at g-1: nobody reads old slots any more), and
// writes its range of the result for call g only once every local rank has entered call g
// (counter 0 at g: everyone has copied call g-1's result out).
#pragma once

#include <cstdint>

#include "optireduce/engine/hierarchy/host_segment.hpp"
#include "optireduce/engine/hierarchy/slice_map.hpp"

namespace optireduce {

class HostStages {
 public:
  HostStages(HostSegment& segment, int local_index) : segment_(segment), me_(local_index) {}

  // `input`: `elements` floats (at most the segment's slot); `mine`: this rank's range in its
  // host; `reduced` receives the sum over the host's ranks of that range (mine.size() floats).
  Status reduce_scatter(const float* input, std::size_t elements, ElementRange mine, float* reduced, Clock::time_point deadline);
  // `reduced`: this rank's range summed over every host; `output` receives all `elements`.
  // `failed`: this rank's part of the call failed (a slice exchange, its reduce-scatter); then,
  // or where another local rank's did, the all-gather fails too, on every local rank alike.
  // `dropped`: in, the entries this rank's exchanges left out; out, those of every local rank
  // (each slice has one holder on the host: the host's sum is the whole call's).
  Status all_gather(const float* reduced, ElementRange mine, float* output, std::size_t elements, Clock::time_point deadline,
                    bool failed = false, std::uint64_t* dropped = nullptr);

  // Bytes this rank wrote to and read from the segment (the report's shared-memory bytes).
  std::uint64_t shared_memory_bytes() const { return bytes_; }

 private:
  // Waits until every local rank's counter `which` reaches `call`.
  Status wait_all(int which, std::uint64_t call, Clock::time_point deadline, const char* stage) const;

  HostSegment& segment_;
  int me_;
  std::uint64_t call_ = 0;
  std::uint64_t bytes_ = 0;
};

}  // namespace optireduce
