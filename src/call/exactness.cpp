// The end of a calibration call made exact by resends: whether its result is exact on every rank,
// decided by every rank alike from the lists of missing chunks, over the datagram path itself.
// The job's MPI would do it in one small allreduce, but where the network loses packets that
// allreduce rides the same lossy path over TCP, and a lost segment waits out a retransmission
// timeout, for every rank.
//
// The answer is "not exact" as soon as any list names a chunk or any chunk came reduced without
// every contribution (each rank that lacks nothing saw every such flag); "exact" only once every
// rank's list came and all are empty. Either way it is the same on every rank that knows it. A
// rank that knows says so on its list; it sends its list again, asking for an answer, to each
// peer that has not said so (at growing intervals), and stays (answering resends and lists) until
// each has or a linger has passed: a peer leaves only once it knows this rank knows, so a rank
// that still lacks a list is sent it again and again while its peers linger.
#include <algorithm>

#include "optireduce/engine/clock_us.hpp"
#include "optireduce/engine/call/tar_call.hpp"
#include "optireduce/engine/tar/schedule.hpp"

namespace optireduce {

bool TarCall::exactness_known() const {
  return !s_.fill.union_empty() || s_.ledger.dropped() > 0 || s_.fill.complete(s_.ranks);
}

bool TarCall::exact_everywhere() const {
  return s_.fill.complete(s_.ranks) && s_.fill.union_empty() && s_.ledger.dropped() == 0;
}


bool TarCall::decide_exactness() {
  auto ask_wait = [&] { return us_duration(DeadlineController::decision_ask_wait_us(budget_.us[1], asks_)); };
  const auto linger = us_duration(DeadlineController::decision_linger_us(budget_.us[1]));
  auto next_ask = Clock::now() + ask_wait();
  auto leave_by = Clock::time_point::max();  // set once this rank knows, and has said so
  if (!exactness_known()) send_list_to_all(list_copies_, 0);
  for (;;) {
    const bool known = exactness_known();
    if (known && leave_by == Clock::time_point::max()) {
      send_list_to_all(kDecidedCopies, WireHeader::kFlagDecided);
      leave_by = Clock::now() + linger;
    }
    const auto now = Clock::now();
    if (known && (s_.fill.all_decided(s_.rank) || now >= std::min(leave_by, hard_deadline_))) break;
    if (!known && now >= hard_deadline_) return false;
    const Status st = wait(std::min({next_ask, leave_by, hard_deadline_}),
                           [&] { return exactness_known() != known || (known && s_.fill.all_decided(s_.rank)); });
    if (!st.ok() && st.code() != StatusCode::timeout) return false;
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
  return true;
}

}  // namespace optireduce
