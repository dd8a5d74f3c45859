#include "optireduce/engine/hierarchy/host_stages.hpp"

#include <algorithm>
#include <cstring>
#include <string>

#include "optireduce/engine/hierarchy/host_sum.hpp"
#include "optireduce/engine/hierarchy/shared_wait.hpp"

namespace optireduce {
namespace {

// Reads of a local rank's counter before the wait for it sleeps.
constexpr unsigned kSpinsBeforeSleep = 1024;

}  // namespace

Status HostStages::wait_all(int which, std::uint64_t call, Clock::time_point deadline, const char* stage,
                            Clock::duration grace) const {
  // Until when local rank k may still be waited for: its latest mark in this call, plus `grace`.
  auto marked_until = [&](int k) {
    if (grace == Clock::duration::zero() || segment_.counter(k, 4).load(std::memory_order_acquire) != call) return deadline;
    return std::max(deadline, Clock::time_point(Clock::duration(segment_.counter(k, 5).load(std::memory_order_relaxed))) + grace);
  };
  // A short spin catches a rank that is about to arrive; then the wait sleeps until that rank's
  // store wakes it (shared_wait.hpp), leaving the core to ranks still at work.
  for (int k = 0; k < segment_.local_ranks(); ++k) {
    const auto& word = segment_.counter(k, which);
    unsigned spins = 0;
    for (std::uint64_t seen; (seen = word.load(std::memory_order_acquire)) < call;) {
      if (++spins < kSpinsBeforeSleep) continue;
      const auto until = marked_until(k);
      if (Clock::now() >= until)
        return Timeout(std::string("local rank ") + std::to_string(k) + " of this host did not reach the " + stage +
                       " of call " + std::to_string(call) + " in time");
      sleep_while_unchanged(word, seen, until);
    }
  }
  return {};
}

Status HostStages::agree(int stage, const Status& mine, const char* what) {
  // The first vote decides; a rank that gave up on a late one thus takes it along. Whoever reads
  // "ok" here reads it after the rank that set it saw every local rank's writes of the stage.
  auto& word = segment_.verdict(stage, call_);
  const std::uint64_t decided = 2 * call_, vote = decided + (mine.ok() ? 0 : 1);
  std::uint64_t seen = word.load(std::memory_order_acquire);
  while (seen < decided)
    if (word.compare_exchange_weak(seen, vote, std::memory_order_acq_rel, std::memory_order_acquire)) seen = vote;
  if (seen == decided) return {};
  if (!mine.ok()) return mine;
  return PeerError(std::string("another local rank of this host failed the ") + what + " of call " + std::to_string(call_));
}

Status HostStages::reduce_scatter(const void* input, std::size_t elements, ElementRange mine, void* reduced,
                                  Clock::time_point deadline, ElementFormat format) {
  const std::size_t size = element_bytes(format);
  if (elements * size > segment_.slot_bytes())
    return Invalid(std::to_string(elements * size) + " bytes exceed the host's shared slot of " +
                   std::to_string(segment_.slot_bytes()));
  const std::uint64_t call = ++call_;
  const auto* in = static_cast<const std::byte*>(input);
  Status arrived = wait_all(1, call - 1, deadline, "end of the previous call");
  if (arrived.ok()) {
    // The other ranks read only their own ranges of this slot: this rank's range stays out of it
    // (it sums that from `input`).
    std::byte* slot = segment_.slot(me_);
    std::memcpy(slot, in, mine.begin * size);
    std::memcpy(slot + mine.end * size, in + mine.end * size, (elements - mine.end) * size);
    segment_.counter(me_, 0).store(call, std::memory_order_release);
    wake_sleepers(segment_.counter(me_, 0));
    arrived = wait_all(0, call, deadline, "reduce-scatter");
  }
  OR_RETURN_IF_ERROR(agree(0, arrived, "reduce-scatter"));
  // In local-rank order on every rank; this rank's own part is the same bits from its input.
  parts_.clear();
  for (int k = 0; k < segment_.local_ranks(); ++k)
    parts_.push_back((k == me_ ? in : static_cast<const std::byte*>(segment_.slot(k))) + mine.begin * size);
  sum_host_parts(format, parts_, reduced, mine.size());
  const auto others = static_cast<std::size_t>(segment_.local_ranks() - 1);
  const bool into_result = reduced == result_range(mine, format);
  bytes_ += (elements - mine.size() + mine.size() * others + (into_result ? mine.size() : 0)) * size;
  return {};
}

void* HostStages::result_range(ElementRange mine, ElementFormat format) const {
  return segment_.result() + mine.begin * element_bytes(format);
}

void HostStages::mark_progress() {
  segment_.counter(me_, 5).store(static_cast<std::uint64_t>(Clock::now().time_since_epoch().count()), std::memory_order_relaxed);
  segment_.counter(me_, 4).store(call_, std::memory_order_release);
}

Status HostStages::all_gather_range(const void* reduced, ElementRange mine, void* output, ElementRange wanted,
                                    Clock::time_point deadline, bool failed, std::uint64_t* dropped, Clock::duration grace,
                                    ElementFormat format) {
  const std::size_t size = element_bytes(format);
  std::byte* result = segment_.result();
  const bool in_place = reduced == result + mine.begin * size;
  // A failed part fails the host's verdict (its flag is read with its counter): nobody copies this
  // call's result, and a local rank may still be copying the last call's out of the area.
  if (!in_place && !failed) std::memcpy(result + mine.begin * size, reduced, mine.size() * size);
  if (failed) segment_.counter(me_, 2).store(call_, std::memory_order_relaxed);
  if (dropped) segment_.counter(me_, 3).store(*dropped, std::memory_order_relaxed);
  segment_.counter(me_, 1).store(call_, std::memory_order_release);
  wake_sleepers(segment_.counter(me_, 1));
  // A rank whose part failed knows the verdict already: it need not wait for anyone to give it.
  Status vote = failed ? PeerError("this rank's part of call " + std::to_string(call_) + " failed")
                       : wait_all(1, call_, deadline, "all-gather", grace);
  for (int k = 0; k < segment_.local_ranks() && vote.ok(); ++k)
    if (segment_.counter(k, 2).load(std::memory_order_relaxed) == call_)
      vote = PeerError("local rank " + std::to_string(k) + " of this host failed its part of call " + std::to_string(call_));
  OR_RETURN_IF_ERROR(agree(1, vote, "all-gather"));
  if (dropped) {
    *dropped = 0;
    for (int k = 0; k < segment_.local_ranks(); ++k) *dropped += segment_.counter(k, 3).load(std::memory_order_relaxed);
  }
  if (wanted.size()) std::memcpy(output, result + wanted.begin * size, wanted.size() * size);
  bytes_ += ((in_place ? 0 : mine.size()) + wanted.size()) * size;  // (a failed part returned above)
  return {};
}

}  // namespace optireduce
