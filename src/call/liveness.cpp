// How a bounded call sees its own stalls (every transport), and how a datagram call tells a
// stalled peer from a lossy path: heartbeats out, silences in, the time stalls held the call, and
// the waits that hold a phase or the fill agreement for a stalled peer (design.md, "Stalled ranks
// over datagrams", "A rank's own stall").
#include <algorithm>

#include "optireduce/engine/clock_us.hpp"
#include "optireduce/engine/call/tar_call.hpp"

namespace optireduce {

void TarCall::start_liveness() {
  // Not in a probe: it times the datagram path within its budget, and a wait for a stalled peer
  // would teach the calibration the stall.
  if (stats_.kind != CallKind::bounded || probe_ || s_.ranks < 2) return;
  // A silence is no longer than the quiet gap of the call's shortest phase: a phase closes a quiet
  // gap after its last arrival, and a peer stopped just after its last data must look stalled by
  // then (the calibration may leave one phase's budget many times the other's).
  const double shortest_phase_us = scatter_only() ? budget_.us[0] : std::min(budget_.us[0], budget_.us[1]);
  const double longest_phase_us = scatter_only() ? budget_.us[0] : std::max(budget_.us[0], budget_.us[1]);
  // Over every transport: a rank that was stopped read nothing meanwhile, whatever the network did.
  running_tick_ = us_duration(DeadlineController::heartbeat_us(shortest_phase_us));
  silence_ = us_duration(DeadlineController::silence_us(shortest_phase_us));
  last_ran_ = Clock::now();
  // Over a transport that loses nothing a silent peer is only slow: no heartbeats.
  if (transport_.traits().reliable) return;
  heartbeat_ = running_tick_;
  stall_wait_ = us_duration(DeadlineController::stall_wait_us(longest_phase_us));
  next_beat_ = last_ran_ + heartbeat_;
  // Every heartbeat of the call is the same header, in one slot.
  encode(header_of(MessageKind::alive), EncodedHeader(beat_header_, WireHeader::kEncodedSize));
}

Status TarCall::poll_alive(Clock::time_point until, const std::function<void(const InboundMessage&)>& handler) {
  note_running();
  beat();
  const Status st = transport_.poll(std::min({until, next_beat(), next_look()}), handler);
  note_running();
  return st;
}

void TarCall::note_stall(Clock::time_point from, Clock::time_point to) {
  // Counted once however many see it: this rank's own gap shows as every peer's silence too.
  from = std::max(from, stall_counted_until_);
  if (to <= from) return;
  stalled_ += to - from;
  stall_counted_until_ = to;
  stats_.stall_us = std::chrono::duration<double, std::micro>(stalled_).count();
}

void TarCall::note_running() {
  if (!watches_own_stall()) return;
  const auto now = Clock::now();
  if (now - last_ran_ > silence_) {
    note_stall(last_ran_, now);
    resumed_at_ = now;
  }
  last_ran_ = now;
}

void TarCall::beat() {
  if (!beats()) return;
  const auto now = Clock::now();
  if (now < next_beat_) return;
  next_beat_ = now + heartbeat_;
  const EncodedHeader header(beat_header_, WireHeader::kEncodedSize);
  for (int p = 0; p < s_.ranks; ++p) {
    if (p == s_.rank || now - s_.posted_at[static_cast<std::size_t>(p)] < heartbeat_ / 2) continue;
    // A heartbeat that cannot be sent now is no failure: the next pass tries again.
    if (transport_.send(p, Lane::control, header, {}).ok()) s_.posted_at[static_cast<std::size_t>(p)] = now;
  }
}

Clock::time_point TarCall::quiet_peers_until(Clock::time_point now, std::optional<std::size_t> phase) const {
  auto until = Clock::time_point::min();
  if (!beats()) return until;
  for (int p = 0; p < s_.ranks; ++p) {
    const auto i = static_cast<std::size_t>(p);
    if (p == s_.rank || !s_.heard_from[i]) continue;
    const bool owing = phase && owes(*phase, p);
    if (!owing && (s_.done_from[i] || s_.fill.has_list(p))) continue;
    const auto quiet = now - s_.heard_at[i];
    // Quiet for longer than a stall is waited for: gone (its "done" lost) or lost with its data.
    if (quiet > stall_wait_) continue;
    // Stalled: looked at again a silence later (it resumes, or the stall wait ends).
    // (A phase closes a quiet gap, no shorter than a silence, after its last arrival: a peer quiet
    // since then has been silent a whole silence.)
    if (quiet >= silence_) until = std::max(until, std::min(now + silence_, s_.heard_at[i] + stall_wait_));
    // Its heartbeats are overdue: stalled if it stays quiet until a silence is complete.
    else if (quiet > kOverdueBeats * heartbeat_) until = std::max(until, s_.heard_at[i] + silence_);
  }
  return until;
}

void TarCall::note_alive(std::uint32_t source, Clock::time_point arrived) {
  if (source >= s_.heard_at.size()) return;
  auto& at = s_.heard_at[source];
  if (s_.in_call && beats() && s_.heard_from[source] && arrived - at > silence_) {
    note_stall(at, arrived);
    s_.heard_again_at[source] = std::max(s_.heard_again_at[source], arrived);
  }
  at = std::max(at, arrived);
}

bool TarCall::wait_for_lists(Clock::time_point until) {
  for (;;) {
    const Status st = wait(until, [&] { return s_.fill.complete(s_.ranks); });
    if (st.ok()) return true;
    if (st.code() != StatusCode::timeout || !beats()) return false;
    // A peer without a list that is stalled, or resumed from a stall, is waited for as in the phases.
    const auto now = Clock::now();
    auto later = quiet_peers_until(now);
    if (later == Clock::time_point::min() && stalled_ > Clock::duration::zero())
      later = peers_close_by(std::max(all_heard_at_, start_) + stalled_);
    later = std::min(hard_deadline_, later);
    if (later <= now) return false;
    until = later;
  }
}

}  // namespace optireduce
