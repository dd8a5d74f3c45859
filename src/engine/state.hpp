// What an engine keeps for its communicator from call to call: its ranks, options, deadlines,
// staging, the bookkeeping of the phases (reset by each call, never reallocated once warm), the
// agreements, the counters. A call (call/tar_call.hpp) works on it; the engine owns it.
#pragma once

#include <algorithm>
#include <cstdint>
#include <memory>

#include "optireduce/engine/deadlines/agreements.hpp"
#include "optireduce/engine/tar/all_gather.hpp"
#include "optireduce/engine/engine/bootstrap.hpp"
#include "optireduce/engine/report/call_stats.hpp"
#include "optireduce/engine/deadlines/controller.hpp"
#include "optireduce/engine/tar/early_store.hpp"
#include "optireduce/engine/config/engine_options.hpp"
#include "optireduce/engine/fault_injector.hpp"
#include "optireduce/engine/tar/fill_agreement.hpp"
#include "optireduce/engine/tar/hadamard_pipeline.hpp"
#include "optireduce/engine/deadlines/loss_ledger.hpp"
#include "optireduce/engine/tar/resend.hpp"
#include "optireduce/engine/tar/call_shape.hpp"
#include "optireduce/engine/tar/scatter_reduce.hpp"
#include "optireduce/engine/engine/staging_pool.hpp"

namespace optireduce {

struct EngineState {
  // `bounded_reliable`: whether the transport of the bounded calls is reliable (the loss budget's
  // figures ride on lists only where it is not).
  EngineState(int rank_, int ranks_, std::uint64_t comm_id_, const EngineOptions& options_,
              std::unique_ptr<Bootstrap> bootstrap_, bool bounded_reliable);

  const int rank;
  const int ranks;
  const std::uint64_t comm_id;
  const EngineOptions options;
  std::unique_ptr<Bootstrap> bootstrap;
  DeadlineController deadlines;

  std::uint64_t calls = 0;  // calls on this communicator (what loss-budget decisions count)
  std::uint64_t epoch = 0;  // Transpose AllReduce runs over a transport (the wire's sequence)
  bool in_call = false;     // a call is running: its messages may land
  ShardLayout layout;       // of the call in progress (or the last one)
  CallShape shape;          // likewise

  EarlyStore early;
  ScatterReduce scatter;
  AllGather gather;
  FillAgreement fill;
  Resends resends;
  LossLedger ledger;
  PhaseStamps stamps;
  std::array<LastSlices, kTarPhases> last_slices;
  std::vector<std::uint8_t> done_from;  // peers that said they have all our data this call
  std::vector<std::uint8_t> heard_from;  // peers any message of this call came from
  // Datagram calls' heartbeats (TarCall::beat): when anything last came from each peer, and
  // when this rank last sent each peer a control message (those leave at once).
  std::vector<Clock::time_point> heard_at;
  std::vector<Clock::time_point> posted_at;
  // When each peer was heard again after a silence (a stall) this call: what it owes comes after.
  std::vector<Clock::time_point> heard_again_at;
  HadamardPipeline hadamard;
  FaultInjector faults;

  // Feeds an exact call's phase times to the deadlines; when that completes a (re)calibration,
  // the ranks agree on the new bounds (collective at that call, the same call on every rank).
  void record_calibration(unsigned call_class, const PhaseTimes& phase_us, std::uint64_t bytes) {
    if (deadlines.record_calibration(call_class, phase_us, double(bytes))) agree_calibrated_bounds(deadlines, call_class, *bootstrap);
  }

  std::vector<int> send_order;  // shards in the order this rank's sends first need them
  // A peer's notice that it gave up on a call this rank is in (or has left): this rank's call
  // fails with the same error, so every rank takes the same path afterwards.
  Status peer_failure;
  // At a failure: what this rank still waited for from each peer (exchanged by every rank).
  enum class FailureView : std::uint8_t { answered = 0, did_not_finish = 1, never_started = 2 };
  std::vector<FailureView> failure_view;
  std::int64_t call_entered_ns = 0;  // wall clock (comparable across hosts) when the call began
  struct FailureNotice {
    std::array<std::byte, WireHeader::kEncodedSize> header{};
    std::vector<std::byte> payload;  // the ranks that did not answer, u32 each
  } failure_notice;
  PhaseTimes my_estimate_us{};  // this rank's latest phase estimates (stamped into its messages)
  std::uint64_t my_estimate_bytes = 0;  // of the call they describe (0: none yet)
  unsigned my_estimate_class = 0;       // and its class
  LossBudgetAgreement loss_budget;
  RejectCounts rejects;
  LateArrivals late;
  // When the last calls closed (for how late their stragglers are): a few are enough, data
  // older than that is stale anyway.
  static constexpr std::size_t kClosedCalls = 8;
  std::array<std::pair<std::uint64_t, Clock::time_point>, kClosedCalls> closed_at{};
  void note_closed(std::uint64_t epoch, Clock::time_point when) { closed_at[epoch % kClosedCalls] = {epoch, when}; }
  void note_late(std::uint64_t epoch, Clock::time_point arrived, std::size_t bytes) {
    const auto& [e, when] = closed_at[epoch % kClosedCalls];
    if (e != epoch || arrived < when) return;
    late.add(epoch, std::chrono::duration<double, std::micro>(arrived - when).count(), bytes);
  }
  // The list of missing chunks that ended this rank's last call over datagrams, once it knew
  // (call/list_exchange.cpp): a peer still in that call that asks is answered from the next one.
  // Datagram transports copy control messages at send, so one header slot serves every answer.
  // When this rank left that exchange: a peer may still be in it for TarCall::longest_exchange_lag
  // (its word that this rank knew lost), and this rank's next exact call waits for it that long.
  struct LastList {
    std::uint64_t epoch = 0, total = 0;  // epoch 0: none
    Clock::time_point left{};
    std::uint16_t flags = 0;
    std::size_t piece_bytes = 0;
    std::vector<std::byte> bitmap;
    std::array<std::byte, WireHeader::kEncodedSize> header{};
  } last_list;
  // When this rank last left a list exchange of another engine of its communicator (a slice's
  // exchange of a three-stage call, or the communicator's own flat call seen from a slice's
  // engine): its peers there may lag this rank as long, and this engine's next exact call waits
  // for them as for its own last list (hierarchy/host_tiers.hpp).
  Clock::time_point other_list_left{};
  // The later of the two: when this rank last left any list exchange of its communicator's
  // engines (the zero time point: never).
  Clock::time_point latest_list_left() const {
    return std::max(last_list.epoch != 0 ? last_list.left : Clock::time_point{}, other_list_left);
  }
  AgreedCounts agreed;
  CallStats last_call;
  std::size_t largest_call_bytes = 0;
  std::vector<float> probe_output;  // where a probe of the bounded transport writes its result (any format)
};

}  // namespace optireduce
