#include "optireduce/engine/scatter_reduce.hpp"

#include <algorithm>
#include <cstdint>
#include <cstring>

#include "optireduce/engine/float_sum.hpp"

namespace optireduce {

void ScatterReduce::begin(const ShardLayout& layout, int rank, std::uint32_t last_slices) {
  layout_ = layout;
  rank_ = rank;
  ranks_ = layout.ranks();
  last_slices_ = last_slices;
  chunks_ = layout.chunks_in_shard(rank);
  reduced_ = 0;
  stride_ = layout.shard_size(rank);
  if (slots_.size() < stride_ * static_cast<std::uint64_t>(ranks_ - 1)) slots_.resize(stride_ * (ranks_ - 1));
  contributors_.assign(chunks_, 0);
  sources_.reserve(static_cast<std::size_t>(ranks_));
  closed_.assign(chunks_, 0);
  seen_.assign(static_cast<std::size_t>(ranks_) * chunks_, 0);
  ready_.clear();
  received_ = 0;
  expected_ = static_cast<std::uint64_t>(chunks_) * (ranks_ - 1);
  last_arrival_ = Clock::now();
  if (ranks_ == 1)
    for (std::uint32_t c = 0; c < chunks_; ++c) ready_.push_back(c);
}

Accepted ScatterReduce::accept(int source, std::uint32_t chunk, const InboundMessage& message) {
  auto& seen = seen_[static_cast<std::size_t>(source) * chunks_ + chunk];
  if (seen) return Accepted::duplicate;
  if (closed_[chunk]) return Accepted::closed;  // closed at the deadline without it
  const Extent e = layout_.chunk(rank_, chunk);
  const int slot = source < rank_ ? source : source - 1;
  float* dst = slots_.data() + slot * stride_ + (e.offset - layout_.shard_begin(rank_));
  if (!message.copy_payload({reinterpret_cast<std::byte*>(dst), e.length * sizeof(float)})) return Accepted::unreadable;
  if (count_in(seen, chunk)) ready_.push_back(chunk);
  return Accepted::taken;
}

bool ScatterReduce::count_in(std::uint8_t& seen, std::uint32_t chunk) {
  seen = 1;
  ++received_;
  last_arrival_ = Clock::now();
  return ++contributors_[chunk] == static_cast<std::uint32_t>(ranks_ - 1);
}

const float* ScatterReduce::take_last_in_place(int source, std::uint32_t chunk, const InboundMessage& message) {
  auto& seen = seen_[static_cast<std::size_t>(source) * chunks_ + chunk];
  if (seen || closed_[chunk] || contributors_[chunk] + 2 != static_cast<std::uint32_t>(ranks_)) return nullptr;
  const Extent e = layout_.chunk(rank_, chunk);
  if (!message.payload_held || message.payload.size() != e.length * sizeof(float) || message.payload_size != message.payload.size() ||
      reinterpret_cast<std::uintptr_t>(message.payload.data()) % alignof(float) != 0)
    return nullptr;
  (void)count_in(seen, chunk);  // the last: complete, reduced by the caller rather than queued
  return reinterpret_cast<const float*>(message.payload.data());
}

std::optional<std::uint32_t> ScatterReduce::next_ready() {
  if (ready_.empty()) return std::nullopt;
  const std::uint32_t c = ready_.back();
  ready_.pop_back();
  return c;
}

ReducedChunk ScatterReduce::reduce(std::uint32_t chunk, const float* own, float* result, float* output, int lent_source,
                                   const float* lent) {
  const Extent e = layout_.chunk(rank_, chunk);
  const std::uint64_t rel = e.offset - layout_.shard_begin(rank_);
  const float* own_base = own + e.offset;
  const bool partial = 1 + static_cast<int>(contributors_[chunk]) < ranks_;
  auto has = [&](int p) { return p == rank_ || seen_[static_cast<std::size_t>(p) * chunks_ + chunk]; };
  // A chunk held from k of N contributors is the sum of those k: a missing contribution counts
  // as zero. Scaling by N/k would be unbiased, but with mixed signs it amplifies what is left
  // (a +x whose -x partner is missing comes back N/k times); dropping never errs by more than
  // the missing data itself.
  sources_.clear();
  for (int p = 0; p < ranks_; ++p)
    if (has(p))
      sources_.push_back(p == rank_         ? own_base
                         : p == lent_source ? lent
                                            : slots_.data() + (p < rank_ ? p : p - 1) * stride_ + rel);
  sum_in_order(sources_.data(), static_cast<int>(sources_.size()), result + e.offset, output ? output + e.offset : nullptr, e.length);
  closed_[chunk] = partial ? kClosedPartial : kClosedExact;
  ++reduced_;
  // Chunks are reduced in the order their contributions complete, so "last" are the last ones
  // reduced, not the highest indices.
  return {e, partial, reduced_ + last_slices_ > chunks_, chunks_ - reduced_};
}

std::uint64_t ScatterReduce::open_entries() const {
  std::uint64_t entries = 0;
  for (std::uint32_t c = 0; c < chunks_; ++c)
    if (!closed_[c] && contributors_[c] + 1 < static_cast<std::uint32_t>(ranks_)) entries += layout_.chunk(rank_, c).length;
  return entries;
}

bool ScatterReduce::waiting_for(int source) const {
  for (std::uint32_t c = 0; c < chunks_; ++c)
    if (!closed_[c] && !seen_[static_cast<std::size_t>(source) * chunks_ + c]) return true;
  return false;
}

void ScatterReduce::missing_from(int source, std::vector<std::uint32_t>& out) const {
  out.clear();
  for (std::uint32_t c = 0; c < chunks_; ++c)
    if (!closed_[c] && !seen_[static_cast<std::size_t>(source) * chunks_ + c]) out.push_back(c);
}

std::vector<std::uint32_t> ScatterReduce::open_chunks() const {
  std::vector<std::uint32_t> open;
  for (std::uint32_t c = 0; c < chunks_; ++c)
    if (!closed_[c]) open.push_back(c);
  return open;
}

}  // namespace optireduce
