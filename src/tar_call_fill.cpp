// The end of a bounded call: the ranks exchange the lists of all-gather chunks each lacks and
// fill the union, so every replica is the same (fill_agreement.hpp).
#include <string>

#include "optireduce/engine/clock_us.hpp"
#include "optireduce/engine/log.hpp"
#include "optireduce/engine/tar_call.hpp"
#include "optireduce/engine/tar_schedule.hpp"

namespace optireduce {

bool TarCall::cuts_all_gather() const {
  if (!bounded()) return false;
  if (!reliable_ || probe_ || (injects_faults() && s_.options.faults.drop > 0)) return true;
  // Over a reliable transport a chunk is never lost, only late behind its stream, where the next
  // call's data would wait for it anyway: what a rank lacks is waited for (keep_waiting_until). The
  // one loss worth cutting is the shard of an owner that is late into the call (a slow rank), where
  // the loss budget allows a whole shard. The owners' cuts of the scatter-reduce bound the call
  // either way; they travel with their shards and need no agreement.
  const std::uint64_t smallest_shard = s_.layout.total() / static_cast<std::uint64_t>(s_.ranks);
  return request_.count == 0 || !over_budget_share(double(smallest_shard) / double(request_.count));
}

bool TarCall::agree_on_fill() {
  s_.fill.build_own_list(s_.gather, s_.ledger, s_.rank, staging_->missing);
  const auto& mine = staging_->missing;
  sent_list_ = true;
  for (int copy = 0; copy < list_copies_; ++copy)
    for (int k = 1; k < s_.ranks; ++k) {
      const int peer = rotation_peer(s_.rank, s_.ranks, k);
      s_.fill.for_each_piece(mine, [&](std::uint64_t offset, std::span<const std::byte> piece) {
        WireHeader h = header_of(MessageKind::missing_list);
        h.offset = offset;
        h.length = static_cast<std::uint32_t>(piece.size());
        EncodedHeader header = staging_->next_header();
        encode(h, header);
        (void)transport_.send(peer, Lane::control, header, piece);
      });
    }
  // A peer sends its list when its own all-gather closes, and a peer that lacks data keeps its
  // phases open while data still comes (keep_waiting_until): so the wait covers the longest
  // both phases may stretch, counted from the last peer's entry, and at least a budget. Waiting
  // for a slow peer costs little: this rank's next call would wait for it too.
  const auto last_entry = unheard_ == 0 ? std::max(all_heard_at_, start_) : Clock::now();
  const auto until = std::min(
      std::max(after_us(Clock::now(), DeadlineController::agreement_wait_us(budget_.us[1])), peers_close_by(last_entry)), hard_deadline_);
  const auto waited_from = Clock::now();
  const bool complete = wait_for_lists(until);
  if (!complete) log_incomplete_fill(waited_from);
  serving_resends_ = false;
  // A shard decoded meanwhile by the worker is decoded again if its data changes here.
  if (transformed_) s_.hadamard.quiesce();
  s_.fill.apply_union(s_.gather, gather_target(), s_.ledger, s_.rank, [&](int owner) {
    if (transformed_) s_.hadamard.changed(owner);
  });
  return complete;
}

void TarCall::log_incomplete_fill(Clock::time_point waited_from) const {
  std::string lacking;
  for (int p = 0; p < s_.ranks; ++p)
    if (p != s_.rank && !s_.fill.has_list(p)) lacking += (lacking.empty() ? "" : ",") + std::to_string(p);
  OR_LOG(info, "call %llu: no list of missing chunks from rank(s) %s after %.1f ms; this rank fills without theirs",
         static_cast<unsigned long long>(s_.epoch), lacking.c_str(), us_since(waited_from) / 1000.0);
}

}  // namespace optireduce
