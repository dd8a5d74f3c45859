// Every deadline rule of bounded calls, per size class (power-of-two byte ranges).
//
// Calibration: the first calls of a size class run exactly; their phase times per byte give the
// bound tB (95th percentile, times the bytes of the call it bounds), and the ranks take the
// largest of their bounds so all wait alike. After that every rank stamps into its messages how
// long it estimates it would have needed to receive everything in its previous call (elapsed /
// fraction received); the median of the stamps a rank saw in a call is that previous call's
// network estimate (every rank's previous call is the same one). The deadline follows the
// median of the recent estimates of the class, each scaled up to the call's size where it came
// from a smaller call (a class spans a factor of two, and a training job's buckets differ in
// size: time grows with the bytes, but a smaller call is not taken to be faster), times a
// margin: it shrinks when the network is quiet and grows when it is busy; a single spike does
// not move it (that is the tail we refuse to wait for), a lasting step does after a few calls.
// It never exceeds the hard cap and never drops below a floor tied to tB. A call is named by its
// class (call_class: its shape and size class) and its bytes (an empty call counts as one byte).
// The rules that shape one call (grace after the last slices, the all-gather floor, how long a
// probe or the end-of-call agreement may take) are here too.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <map>
#include <span>
#include <vector>

#include "optireduce/transport.hpp"

namespace optireduce {

enum class TarPhase { scatter = 0, gather = 1 };
constexpr std::size_t kTarPhases = 2;
using PhaseTimes = std::array<double, kTarPhases>;  // microseconds per phase

struct DeadlineOptions {
  unsigned calibration_calls = 20;
  double cap_us = 1e6;            // OPTIREDUCE_TIMEOUT_MS
  double margin = 2.0;            // deadline = margin * estimate
  double floor_fraction = 0.75;   // never below floor_fraction * tB
  // ...and never above ceiling_factor * tB: a phase's time includes how late the peers entered,
  // which includes their deadlines, so without a ceiling deadlines can feed on themselves. A
  // network that stays slower than that loses data, trips the loss budget, and the exact calls
  // that follow recalibrate tB.
  double ceiling_factor = 4.0;
  std::size_t window = 9;         // calls whose estimates the median runs over
};

struct PhaseDeadlines {
  PhaseTimes us{};  // budget of each phase, microseconds
};

// Size class of a call: floor(log2(bytes)), so 1 MiB and 1.9 MiB share one.
unsigned size_class(std::uint64_t bytes);
// The deadlines' unit: calls of one shape (tar/call_shape.hpp: CallShape::index, 0 for a float32
// allreduce, whose class is its size class) in one size class. A bfloat16 call moves half the
// bytes of a float32 call of as many elements, and a reduce-scatter one phase: each calibrates
// its own bounds.
constexpr unsigned kSizeClassBits = 6;
inline unsigned call_class(std::uint64_t bytes, unsigned shape) { return size_class(bytes) | (shape << kSizeClassBits); }
inline unsigned size_class_of(unsigned call_class) { return call_class & ((1u << kSizeClassBits) - 1); }

class DeadlineController {
 public:
  explicit DeadlineController(const DeadlineOptions& options) : options_(options) {}

  // True while calls of this class must still run exactly (calibration).
  bool calibrating(unsigned call_class) const;
  // Phase times of an exact call: calibration, or (once calibrated) recalibration from the exact
  // calls that follow a loss-budget fallback. True when this call completed a (re)calibration:
  // the bounds are new, and the caller agrees them with the other ranks (agree_bounds).
  bool record_calibration(unsigned call_class, const PhaseTimes& phase_us, double bytes);
  // This rank's bounds, encoded for the exchange with the other ranks.
  std::vector<std::byte> bounds_blob(unsigned size_class) const;
  // Every rank's blob (indexed by rank): the largest bound of each phase becomes everybody's.
  void agree_bounds(unsigned size_class, const std::vector<std::vector<std::byte>>& blobs);

  // Feed the median of the stamps this rank saw in a bounded call, per phase (0: none seen), for
  // the call of `bytes` they describe.
  void record_estimate(unsigned call_class, const PhaseTimes& estimate_us, double bytes);

  // The deadlines of a bounded call of this class. The all-gather moves as much data as the
  // scatter-reduce; it usually looks short only because it overlaps it, so it gets at least
  // half the scatter budget.
  PhaseDeadlines bounded_budget(unsigned call_class, double bytes) const;
  // The calibrated bound tB of a phase (0 while calibrating).
  double bound_us(TarPhase phase, unsigned call_class, double bytes) const;
  double cap_us() const { return options_.cap_us; }

  // Once every sender's last slice of a phase is in, the phase waits at most this for
  // stragglers still in flight (datagrams can arrive out of order), then closes.
  static double grace_us(double phase_budget_us) { return kGraceShare * phase_budget_us; }
  // Over a datagram transport, a phase that asked its senders for lost chunks again waits this
  // long for them before it asks again, and after its last round before it closes (tar/resend.hpp):
  // a round trip and the resent data, on a host whose cores the ranks may share: the floor is a
  // few of the scheduler's time slices, since a sender descheduled by a busy host answers only
  // when it runs again (and a resend that comes ends the wait at once: the floor costs only
  // where the resent data is lost again).
  static double resend_wait_us(double phase_budget_us) { return std::max(kResendFloorUs, kResendShare * phase_budget_us); }
  // How long after a sender's first last slice its announced later ones may take before the
  // phase asks for them (and what else it lacks) as lost: a short grace, at most a resend wait.
  static double follow_wait_us(double phase_budget_us) {
    return std::min(resend_wait_us(phase_budget_us), std::max(kFollowFloorUs, grace_us(phase_budget_us)));
  }
  // At a phase's deadline the phase keeps waiting while data still comes: it closes once nothing
  // arrived for this long (a busy CPU delays data; only a quiet network has lost it), and at the
  // latest at stretch_limit.
  static double quiet_gap_us(double phase_budget_us) { return std::max(kQuietFloorUs, kQuietShare * phase_budget_us); }
  static double stretch_limit_us(double phase_budget_us) { return kMaxStretch * phase_budget_us + quiet_gap_us(phase_budget_us); }
  // Over datagrams a rank in a call sends each peer it has sent no control message for this long a
  // heartbeat; a peer nothing came from for silence_us (several heartbeats, lost at random
  // together only rarely) is stalled, not behind a lossy path: what it owes is late, not lost.
  // Both from the budget of the call's shortest phase (TarCall::start_liveness).
  static double heartbeat_us(double shortest_phase_us) { return quiet_gap_us(shortest_phase_us) / kHeartbeatsPerSilence; }
  static double silence_us(double shortest_phase_us) { return quiet_gap_us(shortest_phase_us); }
  // How long a stalled peer is waited for at most, from when it fell silent: a peer that left the
  // call and whose "done" was lost looks stalled too, and must not hold a call for long.
  static double stall_wait_us(double longest_phase_us) {
    return std::max(kStallWaitFloorUs, 2 * stretch_limit_us(longest_phase_us));
  }
  // How long a bounded call waits at least for the other ranks' lists of missing chunks, from
  // the end of its own all-gather (TarCall::agree_on_fill waits longer for a peer whose phases
  // may still be stretching); giving up earlier leaves replicas different.
  static double agreement_wait_us(double gather_budget_us) { return std::max(kAgreeMinUs, gather_budget_us); }
  // A calibration call made exact by resends, once it knows whether it was exact everywhere,
  // waits at most this long for word that every peer knows too, asking again meanwhile (a peer
  // that left with this rank's word but not its own lost every copy of it, which costs this wait;
  // a peer that never got this rank's list gets it as long as the wait lasts: a short outage must
  // not fail the call).
  static double decision_linger_us(double gather_budget_us) {
    return std::max(kDecisionLingerFloorUs, kDecisionLingerWaits * resend_wait_us(gather_budget_us));
  }
  // How long a rank that knows waits past the hard deadline of a peer that has not said so, for
  // that peer's failure notice (call/list_exchange.cpp): the peer gives up by then and tells its
  // peers, but a host that stops it just then (loaded, SIGSTOP) delays the notice by as long,
  // and a rank that left meanwhile would end the call as done while the peer fails it. Silence
  // cannot tell that peer from one that knew and left with its word lost, nor can a later call
  // reach a rank whose next collective is the application's own: the rank that knows waits here.
  static double notice_wait_us() { return kNoticeWaitUs; }
  // The n-th ask of that exchange (from 0) comes this long after the one before: a resend wait,
  // doubling every few asks up to a limit, so a call's asks span the linger.
  static double decision_ask_wait_us(double gather_budget_us, int n) {
    return resend_wait_us(gather_budget_us) * double(1 << std::min(n / kAsksPerDoubling, kMostAskDoublings));
  }
  // A run of the datagram path during calibration (a probe beside an exact call, or a call made
  // exact by resends) may take this long: a multiple of the fastest exact call of the class (or
  // of another class, per byte), so the first call's connection set-up cannot stretch it, with
  // room for the resend rounds; before any exact call, a first budget.
  double probe_budget_us(unsigned size_class) const;
  // An exact call of the class took this long (any path).
  void note_exact_call(unsigned size_class, double exact_us);
  // Datagrams still queued before an exact call are pushed out for at most this long.
  static double drain_before_exact_us() { return kDrainBeforeExactUs; }
  // The pace of datagrams: the rate at which a calibration call moved `bytes` of this rank's
  // sends in `call_us`, with headroom; never lower than what was suggested before.
  double pace_bytes_per_s(double bytes, double call_us);

  // What a phase teaches the deadlines: the time it would have needed for everything, from the
  // pace at which data actually came (until the last arrival, not until the deadline: data that
  // was lost, rather than slow, must not stretch the estimate, or deadlines would feed on
  // themselves). 0: no estimate (nothing came); the loss budget answers such a network.
  static double needed_us(double phase_us, double fraction, Clock::time_point from, Clock::time_point last);
  // What a calibration probe of a phase teaches: its needed time, but never more than
  // kMaxStretch times what the phase took (a probe that saw a sliver of its data in its budget
  // would extrapolate that sliver into deadlines of seconds); the phase time when nothing came.
  static double probe_estimate_us(double needed, double phase_us);

 private:
  static constexpr double kGraceShare = 0.05;
  static constexpr double kResendShare = 0.10;
  static constexpr double kResendFloorUs = 3000;
  static constexpr double kFollowFloorUs = 1000;
  // Longer than a scheduler's time slice on an oversubscribed node: a peer that was descheduled
  // is not a lost message.
  static constexpr double kQuietFloorUs = 10000;
  static constexpr double kQuietShare = 0.25;
  static constexpr double kMaxStretch = 4.0;
  static constexpr double kHeartbeatsPerSilence = 6.0;
  static constexpr double kStallWaitFloorUs = 500e3;
  static constexpr double kNoticeWaitUs = 1e6;
  static constexpr double kAgreeMinUs = 500;
  static constexpr double kDecisionLingerWaits = 16;
  static constexpr double kDecisionLingerFloorUs = 500e3;
  static constexpr int kAsksPerDoubling = 4;
  static constexpr int kMostAskDoublings = 5;
  static constexpr std::size_t kWarmCalibrationCalls = 8;
  static constexpr double kProbeBudgetFactor = 4.0;
  // Room for resend rounds even where the exact call was short (they wait a floor each).
  static constexpr double kProbeBudgetFloorUs = 4 * kResendFloorUs;
  // The communicator's first run over datagrams has nothing to go by: what it cannot finish in
  // this runs again over the exact path.
  static constexpr double kFirstRunBudgetUs = 1e6;
  static constexpr double kDrainBeforeExactUs = 20000;
  static constexpr double kPaceHeadroom = 2.0;

  struct Estimate {
    double us = 0, bytes = 0;
  };
  struct ClassState {
    std::array<std::vector<double>, kTarPhases> calibration;  // microseconds per byte
    PhaseTimes bound_per_byte{};  // tB per phase, per byte of the call
    std::array<std::deque<Estimate>, kTarPhases> recent;
    bool calibrated = false;
    double fastest_exact_us = 0;
  };
  DeadlineOptions options_;
  std::map<unsigned, ClassState> classes_;
  mutable std::vector<double> scratch_;  // bounded_budget's median, without an allocation per call
  bool any_calibrated_ = false;  // some size class has calibrated: the others need fewer calls
  double pace_bytes_per_s_ = 0;
  double fastest_us_per_byte_ = 0;  // of the exact calls of any class (per byte of its class's smallest call)
};

// The stamps of one call: the first of each sender per phase (a chatty sender does not
// outvote the others); their median is the call's network estimate.
class PhaseStamps {
 public:
  void reset(int ranks);
  void note(std::uint32_t source, float scatter_stamp, float gather_stamp);
  // Reorders the stamps (no copy on the per-call path); the same medians however often asked.
  PhaseTimes medians();

 private:
  int ranks_ = 0;
  std::array<std::vector<float>, kTarPhases> stamps_;
  std::vector<std::uint8_t> seen_;  // [phase][source]
};

}  // namespace optireduce
