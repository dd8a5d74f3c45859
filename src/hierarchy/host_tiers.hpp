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

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
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

  // The name of a host's segment, the `generation`-th this communicator attached (from 1).
  static std::string segment_name(std::uint64_t comm_id, const std::string& host, unsigned generation);

  const Placement& placement() const { return placement_; }
  // Over the engines of this rank's slices.
  TransportCounters transport_counters() const;
  std::size_t buffer_bytes() const;
  std::uint64_t shared_memory_bytes() const { return stages_ ? shm_bytes_before_ + stages_->shared_memory_bytes() : shm_bytes_before_; }

 private:
  HostTiers(int rank, Placement placement, SliceMap slices, std::uint64_t comm_id, std::chrono::milliseconds watchdog,
            Clock::duration exchange_grace);
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
  std::vector<std::byte> reduced_;      // this rank's range in its host (after a failure)
};

}  // namespace optireduce
