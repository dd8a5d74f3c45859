// What one engine call did, and the counters an engine keeps over its life.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "optireduce/engine/deadlines/controller.hpp"
#include "optireduce/engine/tar/call_shape.hpp"
#include "optireduce/status.hpp"

namespace optireduce {

// Why a call ran the way it did.
// mpi: exact over the job's MPI, which measured faster here (deadlines/step_aside.hpp).
enum class CallKind { exact, calibration, bounded, fallback, mpi };
const char* to_string(CallKind k);

// A three-stage call's stages (hierarchy/host_tiers.hpp), this rank's share.
struct StageStats {
  bool hierarchical = false;
  double host_reduce_us = 0, exchange_us = 0, host_gather_us = 0;
  std::uint64_t network_bytes = 0;        // this rank's slice exchanges sent, headers included
  std::uint64_t shared_memory_bytes = 0;  // this rank wrote to and read from its host's segment
};

// The rule that held a bounded call's phase open past its deadline: data still coming in
// (flowing), data a peer that resumed from a stall or entered late still owes (late), a peer that
// had not entered (entry), a stalled peer or this rank's own stall (stalled: what was sent to it
// may still be on its way when it runs again). Where several did, the last of that list.
// Written to the trace as one letter.
enum class PhaseHold : char { none = '-', flowing = 'f', late = 'l', entry = 'e', stalled = 's' };
inline PhaseHold stronger(PhaseHold a, PhaseHold b) {
  constexpr std::string_view kWeakestFirst = "-fles";
  return kWeakestFirst.find(static_cast<char>(b)) > kWeakestFirst.find(static_cast<char>(a)) ? b : a;
}

struct CallStats {
  Status status;
  CallKind kind = CallKind::exact;
  std::uint64_t sequence = 0;         // call number on this communicator, from 1
  CallShape shape;                    // what it computed: collective and element format
  std::uint64_t entries = 0;          // result entries (a reduce-scatter's: this rank's block)
  std::uint64_t dropped_entries = 0;  // entries that lacked a contribution or arrived nowhere
  std::uint64_t filled_entries = 0;   // of those, all-gather entries this rank had to fill in
  bool transformed = false;           // ran in the Hadamard domain
  bool fill_agreed = false;           // every rank's missing chunks were known here: same fill
  bool cut = false;                   // a phase closed at its deadline or grace before all its data was in
  std::uint64_t fill_hash = 0;        // which chunks this rank filled (deadlines/loss_ledger.hpp)
  std::string transport;              // the module the call ran over ("ucx", "udp"; "mpi": the bootstrap)
  double latency_us = 0;
  // How long stalls held a bounded call: a gap longer than the quiet gap in this rank's own waits
  // (it was descheduled, stopped; over every transport) or, over a datagram transport, a peer
  // silent as long, each moment counted once. The phases may stretch by as much (design.md,
  // "Stalled ranks over datagrams", "A rank's own stall").
  double stall_us = 0;
  PhaseHold held[2] = {PhaseHold::none, PhaseHold::none};  // per phase: scatter-reduce, all-gather
  PhaseTimes deadline_us{};  // budget of each phase (0 for exact calls)
  PhaseTimes phase_us{};     // time each phase took
  StageStats stages;         // of a three-stage call
  bool ok() const { return status.ok(); }
};

// Messages the engine refused, by reason. Never trusted, always counted.
struct RejectCounts {
  std::uint64_t malformed = 0;   // header failed to decode
  std::uint64_t foreign = 0;     // other communicator or job, or an impossible source rank
  std::uint64_t stale = 0;       // a call that is already over, or a chunk already closed
  std::uint64_t misplaced = 0;   // extent or payload length not a chunk this rank expects
  std::uint64_t duplicate = 0;   // a chunk that was already received
  std::uint64_t overflow = 0;    // early data beyond the bounded early store
  std::uint64_t total() const { return malformed + foreign + stale + misplaced + duplicate + overflow; }
};

// Data that arrived after the call it belonged to had closed without it: what the deadlines did
// not wait for, and how long waiting for it would have taken (measured from each arrival).
struct LateArrivals {
  std::uint64_t messages = 0;
  std::uint64_t bytes = 0;
  double wait_us = 0;  // summed over the messages: arrival time minus the close of their call
  // Summed over calls: how late the last of each call's late data came, i.e. how much longer the
  // call would have lasted had it waited (the messages of one call overlap, so wait_us overstates it).
  double call_wait_us = 0;
  void add(std::uint64_t epoch, double late_us, std::size_t payload_bytes) {
    ++messages;
    bytes += payload_bytes;
    wait_us += late_us;
    if (epoch != epoch_) epoch_ = epoch, epoch_wait_us_ = 0;
    if (late_us > epoch_wait_us_) call_wait_us += late_us - epoch_wait_us_, epoch_wait_us_ = late_us;
  }

 private:
  std::uint64_t epoch_ = 0;  // the call of the latest late data, and how late its latest came
  double epoch_wait_us_ = 0;
};

// What every rank agreed on at the agreement rounds (and two counts of this rank's own).
struct AgreedCounts {
  std::uint64_t divergent_calls = 0;  // calls where some rank filled all-gather chunks alone
  std::uint64_t fallbacks = 0;        // times the loss budget sent the communicator to exact
  std::uint64_t injected_drops = 0;   // chunks discarded by OPTIREDUCE_FAULT_DROP (this rank)
  std::uint64_t fill_agreement_incomplete = 0;  // bounded calls that filled without every rank's list (this rank)
  // Calibration calls whose run over the datagram path missed data somewhere and ran again over
  // the exact path (agreed).
  std::uint64_t calibration_reruns = 0;
  // Resends (tar/resend.hpp), this rank: lists asking for lost chunks, the chunks they named, the
  // chunks sent again on the peers' requests.
  std::uint64_t resend_requests = 0, resend_chunks_asked = 0, resent_chunks = 0;
};

}  // namespace optireduce
