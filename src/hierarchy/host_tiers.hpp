// The three-stage call of a communicator that spans several hosts with several ranks on some
// (docs/design.md, "Many ranks per host"): an exact reduce-scatter inside each host over shared
// memory (HostStages), one exchange per slice across hosts among the slice's holders (a
// sub-engine each: its own bootstrap split from the communicator's, its own transports and
// communicator id, so datagrams of different slices never mix, and the bounded TAR with its
// deadlines, resends, fill agreement and Hadamard as in any engine), then an exact all-gather
// inside each host.
//
// Failures: every rank of every host ends each call with the same outcome (docs/design.md, "Many
// ranks per host"). A host agrees each of its stages (HostStages' verdicts); a host whose
// reduce-scatter failed enters every exchange of its slices failed, and each slice's engine agrees
// its failures among the slice's holders, one on every host; every holder whose exchange failed
// tells its host's ranks through the all-gather. Every slice has a holder on every host, so a
// failure of any host or any exchange reaches every rank. Every rank runs every exchange of its
// slices in every call, failed or not, so no holder waits for one that gave up.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "optireduce/engine/engine/bootstrap.hpp"
#include "optireduce/engine/hierarchy/host_stages.hpp"
#include "optireduce/engine/hierarchy/slice_map.hpp"
#include "optireduce/engine/report/call_stats.hpp"
#include "optireduce/transport.hpp"

namespace optireduce {

class Engine;

class HostTiers {
 public:
  // Makes the engine of one slice's exchange over its bootstrap (collective over its holders).
  using MakeEngine = std::function<std::unique_ptr<Engine>(int slice, int rank, int ranks, std::unique_ptr<Bootstrap>, Status&)>;
  // Collective over the communicator's ranks (`parent`): splits a bootstrap for every slice and
  // makes the engines of this rank's slices, in buffer order. The outcome is agreed: every rank
  // gets null (and `status` why) where any rank failed.
  static std::unique_ptr<HostTiers> create(int rank, const Placement& placement, std::uint64_t comm_id, Bootstrap& parent,
                                           const MakeEngine& make, std::chrono::milliseconds watchdog,
                                           Clock::duration exchange_grace, Status& status);
  ~HostTiers();

  // An allreduce (sum) of `count` elements of `format` in three stages; `stats` comes with the
  // call's sequence and shape. The host stages and the slices' exchanges carry the format's own
  // elements: a 16-bit call moves half the bytes of a float32 one of as many elements.
  CallStats allreduce(const void* input, void* output, std::uint64_t count, ElementFormat format, bool bounded,
                      CallStats stats, Clock::time_point start);

  // A reduce-scatter (sum) of `format` in three stages (hierarchy/host_reduce_scatter.cpp,
  // docs/design.md "Reduce-scatters in three stages"): `blocks` one per rank, as
  // Engine::reduce_scatter takes them; only where takes_reduce_scatter(blocks).
  CallStats reduce_scatter(const void* input, void* output, std::span<const std::uint64_t> blocks, ElementFormat format,
                           bool bounded, CallStats stats, Clock::time_point start);
  // Whether the three stages take this reduce-scatter: the same answer on every rank (the
  // placement and the blocks are); where not, rank 0 logs why, once per reason.
  bool takes_reduce_scatter(std::span<const std::uint64_t> blocks);

  // The name of a host's segment, the `generation`-th this communicator attached (from 1).
  static std::string segment_name(std::uint64_t comm_id, const std::string& host, unsigned generation);

  // When this rank last left a list exchange of any engine of its communicator: the
  // communicator's engine notes its own before each call, and after it takes the latest of the
  // slices' (Engine::list_left). Each slice's engine is told before its exchange, so its exact
  // calls wait for peers that may still be in another engine's list exchange (a flat call's, or
  // another slice's), as they wait for their own (docs/design.md, "Many ranks per host").
  void note_list_left(Clock::time_point left) { list_left_ = std::max(list_left_, left); }
  Clock::time_point list_left() const { return list_left_; }

  const Placement& placement() const { return placement_; }
  // Over the engines of this rank's slices.
  TransportCounters transport_counters() const;
  std::size_t buffer_bytes() const;
  std::uint64_t shared_memory_bytes() const { return stages_ ? shm_bytes_before_ + stages_->shared_memory_bytes() : shm_bytes_before_; }

 private:
  HostTiers(int rank, Placement placement, SliceMap slices, std::uint64_t comm_id, std::chrono::milliseconds watchdog,
            Clock::duration exchange_grace);
  // Stage 1's outcome: where this rank's slices are exchanged (`work` holds the buffer from
  // element `begin` on: its range in the host's result area, a private buffer after a failure,
  // the whole buffer on a host of one rank) and whether the host's reduce-scatter failed.
  struct HostSums {
    std::byte* work = nullptr;
    std::size_t begin = 0;
    Status failure;
  };
  // Stage 1: this rank's range of `input` summed over its host; a host of one rank copies
  // `input` to `whole` (`elements` elements) instead.
  HostSums reduce_in_host(const void* input, void* whole, std::size_t elements, ElementRange mine, ElementFormat format,
                          Clock::time_point deadline);
  // Stage 2: `exchange` on each of this rank's slices that is not empty, in buffer order, the
  // slice's elements at `at` (flagged with the failure so far), its figures folded into `stats`;
  // returns the call's failure so far.
  using Exchange = std::function<CallStats(Engine& engine, std::byte* at, ElementRange slice, const Status& failed)>;
  Status exchange_slices(const HostSums& sums, std::size_t elements, ElementFormat format, CallStats& stats,
                         const Exchange& exchange);
  // The figures every three-stage call ends with, and its outcome.
  void finish_stats(CallStats& stats, std::uint64_t shm_before, double exchanged_at, Clock::time_point start,
                    const Status& failure) const;
  static std::uint64_t segment_id(std::uint64_t comm_id, unsigned generation);
  // The host's segment holds `bytes` per slot: attached again, larger, where it does not (every
  // local rank sees the same count, so all attach together).
  Status fit_segment(std::size_t bytes, Clock::time_point deadline);

  const int rank_;
  const Placement placement_;
  const SliceMap slices_;
  const std::uint64_t comm_id_;
  const std::chrono::milliseconds watchdog_;
  // The longest one exchange may take once begun: the all-gather waits that long for a local
  // rank past its latest exchange's start, even beyond the call's watchdog.
  const Clock::duration exchange_grace_;
  const int local_index_, local_ranks_;
  std::vector<int> my_slices_;
  std::vector<std::unique_ptr<Engine>> engines_;  // one per slice in my_slices_
  std::unique_ptr<HostSegment> segment_;
  std::unique_ptr<HostStages> stages_;
  unsigned segment_generation_ = 0;
  std::uint64_t shm_bytes_before_ = 0;  // of earlier segments
  // This rank's range in its host (after a failure); a host of one rank: a reduce-scatter's buffer.
  std::vector<std::byte> reduced_;
  // Why this placement's reduce-scatters stay flat (empty: they take the three stages), and the
  // reasons rank 0 logged already.
  const std::string scatter_flat_reason_;
  std::vector<std::string> scatter_reasons_logged_;
  Clock::time_point list_left_{};
};

}  // namespace optireduce
