#include "callback_bootstrap.hpp"

#include <algorithm>
#include <cstring>

namespace optireduce::entry {

CallbackBootstrap::~CallbackBootstrap() {
  if (pending_ && failure_.empty() && c_.finish_allgather) call("finish_allgather", c_.finish_allgather(c_.context));
  if (owns_context_ && c_.release) c_.release(c_.context);
}

bool CallbackBootstrap::call(const char* what, int rc) {
  if (rc != 0 && failure_.empty()) failure_ = std::string("the front end's ") + what + " failed (" + std::to_string(rc) + ")";
  return failure_.empty();
}

std::vector<std::vector<std::byte>> CallbackBootstrap::failed_blobs() const {
  return std::vector<std::vector<std::byte>>(static_cast<std::size_t>(std::max(c_.ranks, 0)));
}

std::vector<std::vector<std::byte>> CallbackBootstrap::cut(const std::vector<std::byte>& all, std::size_t bytes) const {
  std::vector<std::vector<std::byte>> out(static_cast<std::size_t>(c_.ranks));
  for (std::size_t r = 0; r < out.size(); ++r)
    out[r].assign(all.begin() + static_cast<std::ptrdiff_t>(r * bytes), all.begin() + static_cast<std::ptrdiff_t>((r + 1) * bytes));
  return out;
}

std::vector<std::vector<std::byte>> CallbackBootstrap::allgather(std::span<const std::byte> mine) {
  if (!failure_.empty()) return failed_blobs();
  const auto ranks = static_cast<std::size_t>(c_.ranks);
  const std::uint64_t my_length = mine.size();
  std::vector<std::uint64_t> lengths(ranks);
  if (!call("allgather", c_.allgather(c_.context, &my_length, sizeof my_length, lengths.data()))) return failed_blobs();
  const std::uint64_t longest = *std::max_element(lengths.begin(), lengths.end());
  // Buffers of its own: a non-blocking all-gather may be in flight in send_ and receive_.
  std::vector<std::byte> padded(longest, std::byte{0}), all(longest * ranks, std::byte{0});
  std::copy(mine.begin(), mine.end(), padded.begin());
  if (longest && !call("allgather", c_.allgather(c_.context, padded.data(), longest, all.data()))) return failed_blobs();
  auto out = cut(all, longest);
  for (std::size_t r = 0; r < ranks; ++r) out[r].resize(std::min<std::uint64_t>(lengths[r], longest));
  return out;
}

void CallbackBootstrap::start_allgather(std::span<const std::byte> mine) {
  if (!c_.start_allgather || !c_.finish_allgather) return Bootstrap::start_allgather(mine);
  if (pending_) finish_allgather();
  send_.assign(mine.begin(), mine.end());
  receive_.assign(send_.size() * static_cast<std::size_t>(c_.ranks), std::byte{0});
  pending_ = failure_.empty() && call("start_allgather", c_.start_allgather(c_.context, send_.data(), send_.size(), receive_.data()));
}

std::vector<std::vector<std::byte>> CallbackBootstrap::finish_allgather() {
  if (!c_.start_allgather || !c_.finish_allgather) return Bootstrap::finish_allgather();
  const bool was_pending = pending_;
  pending_ = false;
  if (!was_pending || !call("finish_allgather", c_.finish_allgather(c_.context))) return failed_blobs();
  return cut(receive_, send_.size());
}

bool CallbackBootstrap::allreduce_sum(const float* input, float* output, std::uint64_t count) {
  return failure_.empty() && call("allreduce_sum", c_.allreduce_sum(c_.context, input, output, count));
}

bool CallbackBootstrap::split(int color, int key, std::unique_ptr<Bootstrap>& out) {
  out.reset();
  if (!c_.split || !failure_.empty()) return false;
  optireduce_bootstrap group{};
  if (c_.split(c_.context, color, key, &group) != 0) return false;
  if (group.ranks > 0) out = std::make_unique<CallbackBootstrap>(group, true);
  return true;
}

}  // namespace optireduce::entry
