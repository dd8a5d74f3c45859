// The all-gather phase of one call, at a receiver: which reduced chunks of the other shards
// came, and what is written for those that never do.
#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

#include "optireduce/engine/config/engine_options.hpp"
#include "optireduce/engine/deadlines/loss_ledger.hpp"
#include "optireduce/engine/tar/scatter_reduce.hpp"

namespace optireduce {

class AllGather {
 public:
  void begin(const ShardLayout& layout, int rank, ElementFormat format = ElementFormat::float32);

  // A reduced chunk of `owner`'s shard, written straight into place in `target` (the caller's
  // output, or staging in the Hadamard domain). The copy completes before this returns, so
  // nothing writes into the caller's buffer after the call is over.
  Accepted accept(int owner, std::uint32_t chunk, const InboundMessage& message, std::byte* target);
  bool has(int owner, std::uint32_t chunk) const { return seen_[index(owner, chunk)] != 0; }
  // Closes a chunk that is not coming (a late copy must not overwrite the fill, or land after
  // decoding).
  void close(int owner, std::uint32_t chunk) { seen_[index(owner, chunk)] = 1; }

  // Writes the fill of every chunk that never came, counting it in `ledger`. `own_input` is
  // this rank's staged contribution (for the local fill).
  void fill_missing(std::byte* target, FillPolicy policy, const std::byte* own_input, LossLedger& ledger);

  bool complete() const { return remaining_ == 0; }
  // The chunks of `owner`'s shard that have not come (what a resend request names).
  void missing_from(int owner, std::vector<std::uint32_t>& out) const {
    out.clear();
    for (std::uint32_t c = 0; c < layout_.chunks_in_shard(owner); ++c)
      if (!has(owner, c)) out.push_back(c);
  }
  // Entries of the chunks that have not come (they are filled if the phase closes now).
  std::uint64_t missing_entries() const;
  std::uint64_t remaining() const { return remaining_; }
  bool shard_complete(int owner) const { return pending_[owner] == 0; }
  double received_fraction() const { return expected_ ? double(expected_ - remaining_) / double(expected_) : 1.0; }
  Clock::time_point last_arrival() const { return last_arrival_; }

 private:
  std::size_t index(int owner, std::uint32_t chunk) const {
    return static_cast<std::size_t>(owner) * layout_.max_chunks() + chunk;
  }

  ShardLayout layout_;
  int rank_ = 0;
  ElementFormat format_ = ElementFormat::float32;
  std::vector<std::uint8_t> seen_;       // [owner][chunk], stride max_chunks
  std::vector<std::uint32_t> pending_;   // per shard: chunks still to come
  std::uint64_t remaining_ = 0, expected_ = 0;
  Clock::time_point last_arrival_{};
};

// Which senders' final messages of a phase have arrived: once one came from every sender, the
// phase only waits a short grace for stragglers. A last slice says how many more follow it, so
// the phase knows when the very last of each sender's is in (then what it lacks is lost).
class LastSlices {
 public:
  void begin(int ranks) {
    seen_.assign(static_cast<std::size_t>(ranks), 0);
    follow_.assign(static_cast<std::size_t>(ranks), 0);
    first_at_.assign(static_cast<std::size_t>(ranks), Clock::time_point{});
  }
  void note(int source, unsigned follow, Clock::time_point arrived) {
    const auto p = static_cast<std::size_t>(source);
    if (!seen_[p]) {
      seen_[p] = 1;
      follow_[p] = static_cast<std::uint8_t>(follow);
      first_at_[p] = arrived;
    } else {
      follow_[p] = std::min<std::uint8_t>(follow_[p], static_cast<std::uint8_t>(follow));
    }
  }
  template <typename SendsToMe>
  bool all_in(int rank, SendsToMe&& sends_to_me) const {
    for (std::size_t p = 0; p < seen_.size(); ++p)
      if (static_cast<int>(p) != rank && sends_to_me(static_cast<int>(p)) && !seen_[p]) return false;
    return true;
  }
  // Once all_in: when the last slices still announced should have come, `wait` after the first
  // of each sender's (a lost one must not hold the phase longer); min() when every one is in.
  template <typename SendsToMe>
  Clock::time_point settled_at(int rank, SendsToMe&& sends_to_me, Clock::duration wait) const {
    auto at = Clock::time_point::min();
    for (std::size_t p = 0; p < seen_.size(); ++p)
      if (static_cast<int>(p) != rank && sends_to_me(static_cast<int>(p)) && seen_[p] && follow_[p] > 0)
        at = std::max(at, first_at_[p] + wait);
    return at;
  }

 private:
  std::vector<std::uint8_t> seen_;
  std::vector<std::uint8_t> follow_;  // the fewest still to follow of the last slices seen
  std::vector<Clock::time_point> first_at_;
};

}  // namespace optireduce
