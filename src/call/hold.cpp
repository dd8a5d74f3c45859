// At a phase's deadline: whether it keeps waiting, until when, and why (design.md, "Stragglers
// and late data", "Stalled ranks over datagrams", "A rank's own stall"): a stalled peer, data a
// late or resumed peer still owes, or data still coming in (or still on its way to a rank that
// was stopped).
#include <algorithm>
#include <string>

#include "optireduce/engine/clock_us.hpp"
#include "optireduce/engine/log.hpp"
#include "optireduce/engine/call/tar_call.hpp"

namespace optireduce {

TarCall::Hold TarCall::keep_waiting_until(std::size_t phase, Clock::time_point stretch_from, bool last_slices_in,
                                          bool lost) const {
  const double budget = budget_.us[phase];
  // Deadlines bound the network's tail, not a stalled process's: what a peer that stopped
  // sending even its heartbeats owes is late, not lost.
  if (const auto quiet = quiet_peers_until(Clock::now(), phase); quiet != Clock::time_point::min())
    return {std::min(hard_deadline_, quiet), PhaseHold::stalled};
  // A call that would lose more than the loss budget is not a result: what is missing but late,
  // not lost, is waited for as an exact call does. Each rank holds its own loss to a share of the
  // budget: the fill agreement makes every rank's missing chunks everybody's, so the call loses
  // at most the budget. What can no longer come is lost, not late: not waited for.
  if (const auto late_until = lost ? Clock::time_point::min() : missing_late_until();
      late_until != Clock::time_point::min() && over_budget_share(loss_if_closed(phase)))
    return {late_until, unheard_ > 0 ? PhaseHold::entry : PhaseHold::late};
  // While data still comes, the network is delivering: wait until it has been quiet a while
  // (once every sender's last slices are in, only a grace: the rest is in flight or lost). The
  // quiet is the network's only while this rank ran: one that was stopped read nothing meanwhile,
  // and what its peers sent may still be on its way (through a shared-memory FIFO a message moves
  // only while both ends run), so the gap counts from the end of its own last stall too.
  // A peer that owes this rank data and was just heard again after a stall sends it only now, and
  // answers the resend requests that waited for it only now: a quiet gap from its return, not a
  // grace from data that came before it stopped.
  const double gap = last_slices_in ? DeadlineController::grace_us(budget) : DeadlineController::quiet_gap_us(budget);
  const bool own_stall = resumed_at_ > last_arrival_;
  auto quiet_until = after_us(own_stall ? resumed_at_ : last_arrival_, gap);
  const auto peer_back_until = after_us(owing_peer_back_at(phase), DeadlineController::quiet_gap_us(budget));
  const bool peer_stall = peer_back_until > quiet_until;
  quiet_until = std::max(quiet_until, peer_back_until);
  return {std::min({quiet_until, after_us(stretch_from, DeadlineController::stretch_limit_us(budget)), hard_deadline_}),
          own_stall || peer_stall ? PhaseHold::stalled : PhaseHold::flowing};
}

bool TarCall::owes(std::size_t phase, int peer) const {
  if (phase == 0) return s_.scatter.waiting_for(peer);
  return s_.layout.chunks_in_shard(peer) > 0 && !s_.gather.shard_complete(peer);
}

Clock::time_point TarCall::owing_peer_back_at(std::size_t phase) const {
  auto back = Clock::time_point{};
  for (int p = 0; p < s_.ranks; ++p) {
    const auto at = s_.heard_again_at[static_cast<std::size_t>(p)];
    if (p != s_.rank && at > back && owes(phase, p)) back = at;
  }
  return back;
}

double TarCall::loss_if_closed(std::size_t phase) const {
  const std::uint64_t missing = phase == 0 ? s_.scatter.open_entries() : s_.gather.missing_entries();
  return request_.count ? double(s_.ledger.dropped() + missing) / double(request_.count) : 0.0;
}

bool TarCall::over_budget_share(double loss) const {
  return s_.options.loss_budget < 1 && loss > s_.options.loss_budget / s_.ranks;
}

Clock::time_point TarCall::missing_late_until() const {
  // Not when faults are injected (a discarded chunk never comes), nor in a probe (it times the
  // datagram path within its budget); a calibration call made exact by resends waits for a late
  // entry as a bounded call does, since what it lacks is asked for again only once it came.
  if ((probe_ && !request_.exact_by_resends) || s_.options.faults.drop > 0) return Clock::time_point::min();
  if (transport_.traits().reliable || unheard_ > 0) return hard_deadline_;
  // A peer that entered late, or resumed after a stall, first works through what queued for it
  // meanwhile: what it sends then is late too, for as long as its phases may stretch from then.
  if (!waited_for_entry_ && stalled_ == Clock::duration::zero()) return Clock::time_point::min();
  return peers_close_by((waited_for_entry_ ? all_heard_at_ : start_) + stalled_);
}

void TarCall::log_scatter_cut(Clock::time_point scatter_start) const {
  if (!log_enabled(LogLevel::debug)) return;
  std::string owing;
  for (int p = 0; p < s_.ranks; ++p)
    if (p != s_.rank && s_.scatter.waiting_for(p)) owing += (owing.empty() ? "" : ",") + std::to_string(p);
  const std::string own = resumed_at_ == Clock::time_point{} ? "no own stall"
                                                             : "own stall ended " + std::to_string(us_since(resumed_at_) / 1e3) + " ms before";
  OR_LOG(debug, "call %llu: scatter-reduce closed at %.1f ms of a %.1f ms budget without %llu entries from rank(s) %s, "
         "%.1f ms after the last arrival (held %c; stalls %.1f ms; %s)",
         static_cast<unsigned long long>(s_.epoch), us_since(scatter_start) / 1e3, budget_.us[0] / 1e3,
         static_cast<unsigned long long>(s_.scatter.open_entries()), owing.c_str(), us_since(last_arrival_) / 1e3,
         static_cast<char>(stats_.held[0]), stats_.stall_us / 1e3, own.c_str());
}

Clock::time_point TarCall::peers_close_by(Clock::time_point last_entry) const {
  return std::min(hard_deadline_, after_us(last_entry, DeadlineController::stretch_limit_us(budget_.us[0]) +
                                                           DeadlineController::stretch_limit_us(budget_.us[1])));
}

}  // namespace optireduce
