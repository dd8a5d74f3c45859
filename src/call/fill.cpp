// What a bounded call may cut, and the end of one that may cut its all-gather: the ranks exchange
// the lists of all-gather chunks each lacks and fill the union, so every replica is the same
// (tar/fill_agreement.hpp).
#include <algorithm>
#include <string>

#include "optireduce/engine/clock_us.hpp"
#include "optireduce/engine/log.hpp"
#include "optireduce/engine/call/tar_call.hpp"
#include "optireduce/engine/tar/schedule.hpp"

namespace optireduce {

void TarCall::decide_cuts(bool reliable_transport) {
  cuts_scatter_ = cuts_gather_ = bounded();
  if (!bounded() || !reliable_transport || probe_ || (injects_faults() && s_.options.faults.drop > 0)) return;
  // Over a reliable transport data is never lost, only late behind its stream, where the next
  // call's data would wait for it anyway; what a call lacks is waited for whenever closing
  // without it would lose more than this rank's share of the loss budget (keep_waiting_until).
  // Where a chunk is more than that share, no phase closes before the hard deadline: the call
  // runs exactly. An owner may close its scatter-reduce without a late contribution where one
  // chunk is within the share; its cut travels with its shard and needs no agreement. The
  // all-gather's one loss worth cutting is the shard of an owner late into the call (a slow
  // rank), where the budget allows a whole shard.
  auto within_share = [&](std::uint64_t entries) {
    return request_.count == 0 || !over_budget_share(double(entries) / double(request_.count));
  };
  const std::uint64_t smallest_shard = s_.layout.total() / static_cast<std::uint64_t>(s_.ranks);
  cuts_scatter_ = within_share(std::min<std::uint64_t>(s_.layout.chunk_elems(), smallest_shard));
  cuts_gather_ = within_share(smallest_shard);
}

std::span<const std::byte> TarCall::figures_rider() const {
  // A bounded allreduce whose all-gather may be cut ends in lists that every rank gets or the
  // call fails everywhere (over datagrams: decide_cuts, run_all_gather, call/list_exchange.cpp),
  // so the figures that ride on them reach every rank that completes the call, at that call.
  // Whether bounded calls end in such lists at all the loss budget decided once per engine
  // (LossBudgetAgreement::lists_carry_): where they do not, it has no figures for them.
  if (stats_.kind != CallKind::bounded || probe_ || scatter_only() || !cuts_gather_) return {};
  return s_.loss_budget.figures_for_lists();
}

bool TarCall::agree_on_fill() {
  s_.fill.build_own_list(&s_.gather, s_.ledger, s_.rank, staging_->missing);
  sent_list_ = true;
  if (request_.exact_by_resends) {
    const bool decided = exchange_lists();
    serving_resends_ = false;
    return decided;  // the call runs again over the exact path unless exact everywhere: no fill
  }
  const auto waited_from = Clock::now();
  bool complete = false;
  if (list_copies_ > 1) {
    // Lists that may be lost: asked for until every rank has every list, or the call fails on
    // every rank (call/list_exchange.cpp).
    complete = exchange_lists();
    if (!complete) {
      serving_resends_ = false;
      return false;
    }
  } else {
    send_list_to_all(list_copies_, 0);
    // A peer sends its list when its own all-gather closes, and a peer that lacks data keeps its
    // phases open while data still comes (keep_waiting_until): so the wait covers the longest
    // both phases may stretch, counted from the last peer's entry, and at least a budget. Waiting
    // for a slow peer costs little: this rank's next call would wait for it too.
    const auto last_entry = unheard_ == 0 ? std::max(all_heard_at_, start_) : Clock::now();
    const auto until = std::min(
        std::max(after_us(Clock::now(), DeadlineController::agreement_wait_us(budget_.us[1])), peers_close_by(last_entry)), hard_deadline_);
    complete = wait_for_lists(until);
  }
  if (!complete) log_incomplete_fill(waited_from);
  serving_resends_ = false;
  // A shard decoded meanwhile by the worker is decoded again if its data changes here.
  if (transformed_) s_.hadamard.quiesce();
  s_.fill.apply_union(s_.gather, gather_target(), element_bytes_, s_.ledger, s_.rank, [&](int owner) {
    if (transformed_) s_.hadamard.changed(owner);
  });
  return complete;
}

void TarCall::send_list(int peer, std::uint16_t flags) {
  s_.fill.for_each_piece(staging_->missing, [&](std::uint64_t offset, std::span<const std::byte> piece) {
    if (!staging_->has_header_slot()) return;
    WireHeader h = header_of(MessageKind::missing_list);
    h.flags = list_flags(flags);
    h.offset = offset;
    h.length = static_cast<std::uint32_t>(piece.size());
    EncodedHeader header = staging_->next_header();
    encode(h, header);
    (void)transport_.send(peer, Lane::control, header, piece);
  });
}

void TarCall::send_list_to_all(int copies, std::uint16_t flags) {
  for (int copy = 0; copy < copies; ++copy)
    for (int k = 1; k < s_.ranks; ++k) send_list(rotation_peer(s_.rank, s_.ranks, k), flags);
}

void TarCall::log_incomplete_fill(Clock::time_point waited_from) const {
  std::string lacking;
  for (int p = 0; p < s_.ranks; ++p)
    if (p != s_.rank && !s_.fill.has_list(p)) lacking += (lacking.empty() ? "" : ",") + std::to_string(p);
  OR_LOG(info, "call %llu: no list of missing chunks from rank(s) %s after %.1f ms; this rank fills without theirs",
         static_cast<unsigned long long>(s_.epoch), lacking.c_str(), us_since(waited_from) / 1000.0);
}

}  // namespace optireduce
