#include "optireduce/engine/deadlines/agreements.hpp"

#include <algorithm>
#include <cstring>
#include <utility>

#include "optireduce/byte_order.hpp"
#include "optireduce/engine/log.hpp"

namespace optireduce {

void LossBudgetAgreement::after_bounded_call(const CallStats& call, std::uint64_t calls,
                                             std::span<const std::vector<std::byte>> carried, Bootstrap& bootstrap,
                                             AgreedCounts& agreed) {
  window_.entries += call.entries;
  window_.dropped += call.dropped_entries;
  fill_hashes_.push_back(call.fill_hash);
  if (call.entries)
    window_.worst_call_loss = std::max(window_.worst_call_loss, double(call.dropped_entries) / double(call.entries));
  if (++calls_in_window_ < options_.sync_interval) return;

  // The oldest figures first: those over the bootstrap, started a window ago.
  if (pending_) {
    const auto all = bootstrap.finish_allgather();
    pending_ = false;
    decide(all, calls, agreed);
  }
  if (!unsent_.empty()) {
    const std::vector<std::byte> sealed = std::exchange(unsent_, {});
    if (!carried.empty()) {
      decide(carried, calls, agreed);
    } else {
      bootstrap.start_allgather(sealed);
      pending_ = true;
    }
  }
  if (lists_carry_) {
    unsent_ = window_blob();
  } else {
    bootstrap.start_allgather(window_blob());
    pending_ = true;
  }
  calls_in_window_ = 0;
  window_ = {};
  fill_hashes_.clear();
}

std::vector<std::byte> LossBudgetAgreement::window_blob() const {
  std::vector<std::byte> blob(kFiguresBytes + fill_hashes_.size() * sizeof(std::uint64_t));
  std::uint64_t loss_bits = 0;
  std::memcpy(&loss_bits, &window_.worst_call_loss, sizeof loss_bits);
  ByteWriter w(blob.data());
  w.put<std::uint64_t>(window_.entries).put<std::uint64_t>(window_.dropped).put<std::uint64_t>(loss_bits);
  for (std::uint64_t h : fill_hashes_) w.put<std::uint64_t>(h);
  return blob;
}

void LossBudgetAgreement::decide(std::span<const std::vector<std::byte>> all, std::uint64_t calls, AgreedCounts& agreed) {
  Figures sum{};
  const std::size_t hashes = options_.sync_interval;
  std::vector<std::uint64_t> first(hashes, 0);
  std::vector<std::uint8_t> differs(hashes, 0);
  for (std::size_t r = 0; r < all.size(); ++r) {
    const auto& blob = all[r];
    if (blob.size() != kFiguresBytes + hashes * sizeof(std::uint64_t)) continue;
    ByteReader in(blob.data());
    Figures f{};
    f.entries = in.get<std::uint64_t>();
    f.dropped = in.get<std::uint64_t>();
    const auto loss_bits = in.get<std::uint64_t>();
    std::memcpy(&f.worst_call_loss, &loss_bits, sizeof loss_bits);
    sum.entries += f.entries;
    sum.dropped += f.dropped;
    sum.worst_call_loss = std::max(sum.worst_call_loss, f.worst_call_loss);
    for (std::size_t k = 0; k < hashes; ++k) {
      const auto h = in.get<std::uint64_t>();
      if (r == 0) first[k] = h;
      else differs[k] |= h != first[k];
    }
  }
  agreed.divergent_calls += static_cast<std::uint64_t>(std::count(differs.begin(), differs.end(), 1));
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
