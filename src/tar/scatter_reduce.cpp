#include "optireduce/engine/tar/scatter_reduce.hpp"

#include <algorithm>
#include <cstdint>
#include <cstring>

#include "optireduce/elements/convert.hpp"
#include "optireduce/engine/tar/float_sum.hpp"

namespace optireduce {

void ScatterReduce::begin(const ShardLayout& layout, int rank, std::uint32_t last_slices, ElementFormat format) {
  layout_ = layout;
  format_ = format;
  element_bytes_ = element_bytes(format);
  rank_ = rank;
  ranks_ = layout.ranks();
  last_slices_ = last_slices;
  chunks_ = layout.chunks_in_shard(rank);
  reduced_ = 0;
  stride_ = layout.shard_size(rank);
  if (slots_.size() < stride_ * static_cast<std::uint64_t>(ranks_ - 1) * element_bytes_)
    slots_.resize(stride_ * (ranks_ - 1) * element_bytes_);
  if (format != ElementFormat::float32 && running_.size() < stride_) running_.resize(stride_);
  contributors_.assign(chunks_, 0);
  added_.assign(chunks_, 0);
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

void ScatterReduce::bind(const void* own, void* result, void* output, bool add_on_arrival, std::uint64_t origin) {
  own_ = static_cast<const std::byte*>(own);
  result_ = static_cast<std::byte*>(result);
  output_ = static_cast<std::byte*>(output);
  add_on_arrival_ = add_on_arrival;
  origin_ = origin;
}

Accepted ScatterReduce::accept(int source, std::uint32_t chunk, const InboundMessage& message) {
  auto& seen = seen_at(source, chunk);
  if (seen) return Accepted::duplicate;
  if (closed_[chunk]) return Accepted::closed;  // closed at the deadline without it
  const Extent e = layout_.chunk(rank_, chunk);
  const std::size_t bytes = e.length * element_bytes_;
  const bool its_turn = add_on_arrival_ && place_of(source) == static_cast<int>(added_[chunk]) + 1;
  // In its turn, a payload the transport holds is added from there; anything else waits in its
  // slot (and is added from it at once when its turn has come).
  const void* held = its_turn && message.payload_held && message.payload.size() == bytes && message.payload_size == bytes
                         ? message.payload.data()
                         : nullptr;
  if (held) {
    ++added_on_arrival_;
  } else {
    if (!message.copy_payload({slot(source, e.offset - layout_.shard_begin(rank_)), bytes}))
      return Accepted::unreadable;
    ++waited_in_slot_;
  }
  // Counted in first: the pass that adds it also adds the slots after it, and writes the output
  // when it completes the chunk.
  const bool completes = count_in(seen, chunk);
  if (its_turn) add_in_order(chunk, e, held, false);
  if (completes) ready_.push_back(chunk);
  return Accepted::taken;
}

bool ScatterReduce::count_in(std::uint8_t& seen, std::uint32_t chunk) {
  seen = 1;
  ++received_;
  last_arrival_ = Clock::now();
  return ++contributors_[chunk] == static_cast<std::uint32_t>(ranks_ - 1);
}

void ScatterReduce::add_in_order(std::uint32_t chunk, const Extent& e, const void* arrived, bool to_the_end) {
  const std::uint64_t rel = e.offset - layout_.shard_begin(rank_);
  std::uint32_t& added = added_[chunk];
  sources_.clear();
  sources_.push_back(nullptr);  // where the pass starts from: sum_pass fills it in
  int next = static_cast<int>(added) + 1;
  if (arrived) {
    sources_.push_back(arrived);
    ++next;
  }
  for (; next < ranks_; ++next) {
    const int peer = peer_at(next);
    if (seen_at(peer, chunk)) sources_.push_back(slot(peer, rel));
    else if (!to_the_end) break;
  }
  // Once every place is in the sum, this pass makes the final one: it writes the output too, and
  // rounds a widened sum.
  const bool final = next == ranks_;
  // A pass is due for something new to add, for the own contribution alone (the sum starts from
  // it), or for the final sum's copy or rounding.
  if (sources_.size() > 1 || added == 0 || (final && (output_ || format_ != ElementFormat::float32)))
    sum_pass(e, added == 0, final);
  added = static_cast<std::uint32_t>(next - 1);
}

void ScatterReduce::sum_pass(const Extent& e, bool first, bool final) {
  std::byte* sum = result_ + (e.offset - origin_) * element_bytes_;
  std::byte* also = final && output_ ? output_ + (e.offset - origin_) * element_bytes_ : nullptr;
  const std::byte* own = own_ + e.offset * element_bytes_;
  if (format_ == ElementFormat::float32) {
    // The running sum is the result itself.
    sources_[0] = first ? static_cast<const void*>(own) : static_cast<const void*>(sum);
    sum_in_order(sources_.data(), static_cast<int>(sources_.size()), reinterpret_cast<float*>(sum),
                 reinterpret_cast<float*>(also), e.length);
    return;
  }
  float* running = running_.data() + (e.offset - layout_.shard_begin(rank_));
  sources_[0] = own;
  const bool from_own = first;
  WidenedSum pass{format_, from_own ? nullptr : running, sources_.data() + (from_own ? 0 : 1),
                  static_cast<int>(sources_.size()) - (from_own ? 0 : 1), running, final ? sum : nullptr, also};
  sum_widened(pass, e.length);
}

std::optional<std::uint32_t> ScatterReduce::next_ready() {
  if (ready_.empty()) return std::nullopt;
  const std::uint32_t c = ready_.back();
  ready_.pop_back();
  return c;
}

ReducedChunk ScatterReduce::reduce(std::uint32_t chunk) {
  const Extent e = layout_.chunk(rank_, chunk);
  const bool partial = 1 + static_cast<int>(contributors_[chunk]) < ranks_;
  // A chunk held from k of N contributors is the sum of those k: a missing contribution counts
  // as zero. Scaling by N/k would be unbiased, but with mixed signs it amplifies what is left
  // (a +x whose -x partner is missing comes back N/k times); dropping never errs by more than
  // the missing data itself.
  // Not when every peer's contribution is already in the running sum (that pass wrote the
  // output); a lone rank has none, and its own shard is copied here.
  if (static_cast<int>(added_[chunk]) + 1 < ranks_ || ranks_ == 1) add_in_order(chunk, e, nullptr, true);
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
    if (!closed_[c] && !seen_at(source, c)) return true;
  return false;
}

void ScatterReduce::missing_from(int source, std::vector<std::uint32_t>& out) const {
  out.clear();
  for (std::uint32_t c = 0; c < chunks_; ++c)
    if (!closed_[c] && !seen_at(source, c)) out.push_back(c);
}

std::vector<std::uint32_t> ScatterReduce::open_chunks() const {
  std::vector<std::uint32_t> open;
  for (std::uint32_t c = 0; c < chunks_; ++c)
    if (!closed_[c]) open.push_back(c);
  return open;
}

}  // namespace optireduce
