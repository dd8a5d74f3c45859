// The end of a call over a transport that may lose its lists of missing chunks: the exchange that
// makes every rank take the same decision from them (the fill of a bounded call, the exactness
// of a calibration call made exact by resends; tar/fill_agreement.hpp; the outcome of a bounded
// reduce-scatter, whose lists name no chunk and say only that a rank's block is closed), or fail
// the call alike.
//
// A rank that knows (it has what its decision needs: every peer's list, or for exactness a list
// that already decides it) says so on its list, and waits for every peer to say so too. One that
// does not know sends its list again to each peer it lacks word from, asking for an answer, at
// growing intervals; peers answer with their own list, also from their next call once they left.
// Each rank leaves once every peer has said it knows. A rank that still does not know a linger
// after the peers' phases may have closed and after the last word of each peer whose list it
// lacks (until the hard deadline while such a peer has not entered the call, or may be stalled)
// fails the call and tells its peers; a rank that knows waits for a peer that has not said so
// until that peer must have given up, so it hears of the failure and fails the same call. Only a
// direction that goes down just as the last word is sent, for longer than the wait, can still
// part the ranks.
#include <algorithm>

#include "optireduce/engine/clock_us.hpp"
#include "optireduce/engine/call/tar_call.hpp"
#include "optireduce/engine/tar/schedule.hpp"

namespace optireduce {

bool TarCall::list_known() const { return request_.exact_by_resends ? exactness_known() : s_.fill.complete(s_.ranks); }

bool TarCall::exchange_lists() {
  // Timed by the budget of the call's last phase (a reduce-scatter has only its scatter-reduce).
  const double last_phase_us = budget_.us[scatter_only() ? 0 : 1];
  auto ask_wait = [&] { return us_duration(DeadlineController::decision_ask_wait_us(last_phase_us, asks_)); };
  const auto linger = us_duration(DeadlineController::decision_linger_us(last_phase_us));
  auto next_ask = Clock::now() + ask_wait();
  // While this rank does not know: until a linger after the peers' phases may have closed (each
  // sends its list when its all-gather closes). A calibration run's budget is each rank's own
  // (deadlines/controller.hpp: probe_budget_us), so there a peer may be in its phases until the
  // hard deadline.
  const auto last_entry = unheard_ == 0 ? std::max(all_heard_at_, start_) : Clock::now();
  const auto peers_closed = request_.exact_by_resends ? hard_deadline_ : std::max(Clock::now(), peers_close_by(last_entry));
  auto give_up_at = std::min(peers_closed + linger, hard_deadline_);
  // A peer nothing of this call came from has not entered it yet: its list is waited for as long
  // as the call may last (its data is cut from the phases, as the loss budget allows, but only
  // its list tells what it lacks; the call is bounded from the last rank's entry).
  auto late_missing = [&] {
    for (int p = 0; p < s_.ranks; ++p)
      if (p != s_.rank && !s_.fill.has_list(p) && !s_.heard_from[static_cast<std::size_t>(p)]) return true;
    return false;
  };
  auto leave_by = Clock::time_point::max();  // set once this rank knows, and has said so
  bool waited_again = false;                  // leave_by moved once past a stop of this rank
  if (!list_known()) send_list_to_all(list_copies_, 0);
  for (;;) {
    const bool known = list_known();
    if (known && leave_by == Clock::time_point::max()) {
      send_list_to_all(kDecidedCopies, WireHeader::kFlagDecided);
      // A peer that has not said so yet is waited for until it must have given up (at the latest
      // at its hard deadline, later by as much as it entered later: it waits that long for a
      // peer it never heard from, which may be late rather than cut off) and its notice had time
      // to come. A peer that left answers from its next call (answer_late_ask).
      const auto entered_later = all_heard_at_ > start_ ? all_heard_at_ - start_ : Clock::duration::zero();
      leave_by = hard_deadline_ + entered_later + us_duration(DeadlineController::notice_wait_us());
    }
    const auto now = Clock::now();
    if (!s_.peer_failure.ok()) return false;
    if (known && (s_.fill.all_decided(s_.rank) || now >= leave_by)) {
      remember_list();
      return true;
    }
    if (!known && now >= give_up_at) {
      // A peer whose list is missing but which still speaks (its phases ask for resends, its
      // heartbeats come) is still in its phases: a linger from its last word. One that is
      // stalled (silent, heartbeats overdue) is waited for as in the phases.
      auto later = late_missing() ? hard_deadline_ : quiet_peers_until(now);
      for (int p = 0; p < s_.ranks; ++p)
        if (p != s_.rank && !s_.fill.has_list(p)) later = std::max(later, s_.heard_at[static_cast<std::size_t>(p)] + linger);
      later = std::min(later, hard_deadline_);
      if (later <= now) return false;
      give_up_at = later;
    }
    const auto wake = std::min({next_ask, known ? leave_by : give_up_at});
    const Status st = wait(wake, [&] { return list_known() != known || (known && s_.fill.all_decided(s_.rank)); });
    if (!st.ok() && st.code() != StatusCode::timeout) return false;
    // This rank was stopped past the moment it would leave (it woke that late): a loaded host
    // stops every rank at once, and the peer whose notice it waits for gives up only as it
    // resumes too. That peer gets a notice wait from now, once per call (a host that makes every
    // wake late must not hold the call for ever).
    if (const auto now = Clock::now(); known && !waited_again && now >= leave_by && now - wake > us_duration(kStoppedUs)) {
      leave_by = now + us_duration(DeadlineController::notice_wait_us());
      waited_again = true;
    }
    if (Clock::now() >= next_ask) {
      // After the last round the peers' lists may still come, unasked.
      next_ask = ++asks_ < kMostAsks ? Clock::now() + ask_wait() : Clock::time_point::max();
      const std::uint16_t flags = (known ? WireHeader::kFlagDecided : 0) | WireHeader::kFlagWantsAnswer;
      for (int k = 1; k < s_.ranks; ++k) {
        const int peer = rotation_peer(s_.rank, s_.ranks, k);
        if (!s_.fill.decided(peer)) send_list(peer, flags);
      }
    }
  }
}

Clock::time_point TarCall::watchdog_from(const EngineState& state, const TarRequest& request, Clock::time_point start) {
  // A peer may still be in this rank's last list exchange (it waits out a silent peer's failure
  // notice there) and enter this call that much later; an exact call
  // whose watchdog counted from its own start would part the ranks where a rank that had all it
  // needed came just as the others gave up (docs/design.md, "Agreement").
  auto from = std::max(start, request.waits_from);
  if (const auto left = state.latest_list_left(); left != Clock::time_point{})
    from = std::max(from, left + longest_exchange_lag(state.options));
  return from;
}

void TarCall::remember_list() {
  auto& last = s_.last_list;
  last.epoch = s_.epoch;
  last.left = Clock::now();
  last.total = s_.layout.total();
  // A late answer is this list as it was sent, the figures it carried included.
  last.flags = list_flags(static_cast<std::uint16_t>(WireHeader::kFlagDecided | WireHeader::shape_flags(request_.shape.index())));
  last.piece_bytes = transport_.traits().max_message_bytes - WireHeader::kEncodedSize;
  last.bitmap = staging_->missing;
}

void TarCall::answer_late_ask(const WireHeader& ask) {
  auto& last = s_.last_list;
  if (last.epoch == 0 || ask.epoch != last.epoch || !(ask.flags & WireHeader::kFlagWantsAnswer) || transport_.traits().reliable)
    return;
  WireHeader h;
  h.kind = MessageKind::missing_list;
  h.source = static_cast<std::uint32_t>(s_.rank);
  h.comm_id = s_.comm_id;
  h.epoch = last.epoch;
  h.total = last.total;
  h.flags = last.flags;
  for (std::size_t at = 0; at < last.bitmap.size(); at += last.piece_bytes) {
    h.offset = at;
    h.length = static_cast<std::uint32_t>(std::min(last.piece_bytes, last.bitmap.size() - at));
    encode(h, last.header);
    (void)transport_.send(static_cast<int>(ask.source), Lane::control, last.header,
                          std::span<const std::byte>(last.bitmap).subspan(at, h.length));
  }
}

}  // namespace optireduce
