#include "optireduce/engine/agreements.hpp"

#include <algorithm>
#include <bit>
#include <cstring>

#include "optireduce/engine/log.hpp"

namespace optireduce {

void LossBudgetAgreement::after_bounded_call(const CallStats& call, std::uint64_t calls, Bootstrap& bootstrap,
                                             AgreedCounts& agreed) {
  window_.entries += call.entries;
  window_.dropped += call.dropped_entries;
  // A call whose fill every rank agreed on left identical results even if it filled.
  if (call.filled_entries && !call.fill_agreed) window_.filled_calls |= 1ull << calls_in_window_;
  if (call.entries)
    window_.worst_call_loss = std::max(window_.worst_call_loss, double(call.dropped_entries) / double(call.entries));
  if (++calls_in_window_ < options_.sync_interval) return;

  std::vector<std::vector<std::byte>> all;
  const bool have_round = pending_;
  if (pending_) all = bootstrap.finish_allgather();
  bootstrap.start_allgather({reinterpret_cast<const std::byte*>(&window_), sizeof window_});
  pending_ = true;
  if (have_round) decide(all, calls, agreed);
  calls_in_window_ = 0;
  window_ = {};
}

void LossBudgetAgreement::decide(const std::vector<std::vector<std::byte>>& all, std::uint64_t calls, AgreedCounts& agreed) {
  Figures sum{};
  for (const auto& blob : all) {
    Figures f{};
    if (blob.size() == sizeof f) std::memcpy(&f, blob.data(), sizeof f);
    sum.entries += f.entries;
    sum.dropped += f.dropped;
    sum.filled_calls |= f.filled_calls;
    sum.worst_call_loss = std::max(sum.worst_call_loss, f.worst_call_loss);
  }
  agreed.divergent_calls += static_cast<std::uint64_t>(std::popcount(sum.filled_calls));
  const double average = sum.entries ? double(sum.dropped) / double(sum.entries) : 0.0;
  hadamard_active_ = sum.dropped > 0;
  // A window that lost more than the budget on average, or one call that lost most of its
  // entries, sends the communicator to exact calls for a while. (Single calls that overran a
  // little are the bounded mode doing its job on a busy host; they do not.)
  if (average > options_.loss_budget || sum.worst_call_loss > std::max(0.5, options_.loss_budget)) {
    reliable_until_ = calls + options_.reliable_calls_after_overrun;
    ++agreed.fallbacks;
    if (rank_ == 0)
      OR_LOG(warn, "loss over budget %.3f (recent average %.4f, worst call %.4f): the next %u calls on this communicator run exactly",
             options_.loss_budget, average, sum.worst_call_loss, options_.reliable_calls_after_overrun);
  }
}

void agree_calibrated_bounds(DeadlineController& deadlines, unsigned size_class, Bootstrap& bootstrap) {
  deadlines.agree_bounds(size_class, bootstrap.allgather(deadlines.bounds_blob(size_class)));
}

}  // namespace optireduce
