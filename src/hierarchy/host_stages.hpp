// The exact stages of a three-stage call inside one host, over its HostSegment: a reduce-scatter
// (every local rank puts its buffer, but for its own range, in its slot; each sums its own range
// over every rank's slot, its own input in place of its own slot, in local-rank order) and an all-gather (each puts its fully reduced range in the result area; every
// rank copies the whole result). Elements of the call's format: float32, or float16 and bfloat16
// summed in float32 and rounded once (host_sum.hpp). Every wait is bounded.
//
// Reuse without a barrier of its own: a rank writes its slot for call g only once every local
// rank has finished call g-1's reduction (counter 1 at g-1: nobody reads old slots any more), and
// writes its range of the result for call g only once every local rank has entered call g
// (counter 0 at g: everyone has copied call g-1's result out).
//
// One outcome per host: each stage ends with the host's verdict, set by the first local rank to
// decide (every rank there, nothing failed: ok; else failed) and read by every other, so a rank
// that comes after another gave up on it fails that stage too instead of succeeding alone.
#pragma once

#include <cstdint>
#include <vector>

#include "optireduce/elements/format.hpp"
#include "optireduce/engine/hierarchy/host_segment.hpp"
#include "optireduce/engine/hierarchy/slice_map.hpp"

namespace optireduce {

class HostStages {
 public:
  HostStages(HostSegment& segment, int local_index) : segment_(segment), me_(local_index) {}

  // `input`: `elements` elements of `format` (at most the segment's slot); `mine`: this rank's
  // range in its host; `reduced` receives the sum over the host's ranks of that range (mine.size()
  // elements). Not ok on every local rank alike where some local rank did not come by its
  // deadline. Every local rank passes the same format in a call.
  Status reduce_scatter(const void* input, std::size_t elements, ElementRange mine, void* reduced, Clock::time_point deadline,
                        ElementFormat format = ElementFormat::float32);
  // This rank's range of the host's result area (mine.size() elements of `format`). Given as
  // `reduced` to reduce_scatter, the sum lands there and all_gather need not copy it: for the
  // current call's use only once reduce_scatter succeeded (every local rank has then copied out
  // the previous call's result), and written by this rank alone.
  void* result_range(ElementRange mine, ElementFormat format = ElementFormat::float32) const;
  // That this rank is still at work on the current call (before each of its exchanges): the
  // all-gather waits for it up to `grace` past its latest mark, even beyond the deadline.
  void mark_progress();
  // `reduced`: this rank's range summed over every host (or result_range(mine, format) itself,
  // holding it); `output` receives all `elements` (of the format reduce_scatter had).
  // `failed`: this rank's part of the call failed (a slice exchange, its reduce-scatter); then,
  // or where another local rank's did or did not come in time, the all-gather fails on every
  // local rank alike. `dropped`: in, the entries this rank's exchanges left out; out, those of
  // every local rank (each slice has one holder on the host: the host's sum is the whole call's).
  Status all_gather(const void* reduced, ElementRange mine, void* output, std::size_t elements, Clock::time_point deadline,
                    bool failed = false, std::uint64_t* dropped = nullptr, Clock::duration grace = Clock::duration::zero(),
                    ElementFormat format = ElementFormat::float32) {
    return all_gather_range(reduced, mine, output, {0, elements}, deadline, failed, dropped, grace, format);
  }
  // The same, `output` receiving only the result's `wanted` range (a reduce-scatter's block: the
  // host's result holds every local rank's, each written by the holders of its slices).
  Status all_gather_range(const void* reduced, ElementRange mine, void* output, ElementRange wanted, Clock::time_point deadline,
                          bool failed = false, std::uint64_t* dropped = nullptr, Clock::duration grace = Clock::duration::zero(),
                          ElementFormat format = ElementFormat::float32);

  // Bytes this rank wrote to and read from the segment (the report's shared-memory bytes).
  std::uint64_t shared_memory_bytes() const { return bytes_; }

 private:
  // Waits until every local rank's counter `which` reaches `call`: until the deadline, or for a
  // rank that marked progress in this call, until `grace` past its latest mark if that is later.
  Status wait_all(int which, std::uint64_t call, Clock::time_point deadline, const char* stage,
                  Clock::duration grace = Clock::duration::zero()) const;
  // The host's verdict on `stage` of the current call, this rank's `mine` offered as its vote.
  Status agree(int stage, const Status& mine, const char* what);

  HostSegment& segment_;
  int me_;
  std::uint64_t call_ = 0;
  std::uint64_t bytes_ = 0;
  std::vector<const void*> parts_;  // the local ranks' parts of this rank's range, in local-rank order
};

}  // namespace optireduce
