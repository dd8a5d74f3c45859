#include "optireduce/engine/tar/all_gather.hpp"

#include <cstring>
#include <vector>

#include "optireduce/elements/convert.hpp"

namespace optireduce {

void AllGather::begin(const ShardLayout& layout, int rank, ElementFormat format) {
  layout_ = layout;
  rank_ = rank;
  format_ = format;
  seen_.assign(static_cast<std::size_t>(layout.ranks()) * layout.max_chunks(), 0);
  pending_.assign(static_cast<std::size_t>(layout.ranks()), 0);
  remaining_ = 0;
  for (int p = 0; p < layout.ranks(); ++p)
    if (p != rank) remaining_ += pending_[p] = layout.chunks_in_shard(p);
  expected_ = remaining_;
  last_arrival_ = Clock::now();
}

Accepted AllGather::accept(int owner, std::uint32_t chunk, const InboundMessage& message, std::byte* target) {
  auto& seen = seen_[index(owner, chunk)];
  if (seen) return Accepted::duplicate;
  const Extent e = layout_.chunk(owner, chunk);
  const std::size_t bytes = element_bytes(format_);
  if (!message.copy_payload({target + e.offset * bytes, e.length * bytes}))
    return Accepted::unreadable;
  seen = 1;
  --remaining_;
  --pending_[owner];
  last_arrival_ = Clock::now();
  return Accepted::taken;
}

std::uint64_t AllGather::missing_entries() const {
  std::uint64_t entries = 0;
  for (int p = 0; p < layout_.ranks(); ++p)
    if (p != rank_ && pending_[p])
      for (std::uint32_t c = 0; c < layout_.chunks_in_shard(p); ++c)
        if (!seen_[index(p, c)]) entries += layout_.chunk(p, c).length;
  return entries;
}

void AllGather::fill_missing(std::byte* target, FillPolicy policy, const std::byte* own_input, LossLedger& ledger) {
  const std::size_t bytes = element_bytes(format_);
  std::vector<float> widened;
  for (int p = 0; p < layout_.ranks(); ++p) {
    if (p == rank_) continue;
    for (std::uint32_t c = 0; c < layout_.chunks_in_shard(p); ++c) {
      auto& seen = seen_[index(p, c)];
      if (seen) continue;
      seen = 1;
      const Extent e = layout_.chunk(p, c);
      std::byte* dst = target + e.offset * bytes;
      if (policy == FillPolicy::zero) {
        std::memset(dst, 0, e.length * bytes);
      } else if (format_ == ElementFormat::float32) {
        // This rank's own contribution times N: an unbiased guess of the sum.
        const auto* own = reinterpret_cast<const float*>(own_input) + e.offset;
        const auto n = static_cast<float>(layout_.ranks());
        for (std::uint32_t i = 0; i < e.length; ++i) reinterpret_cast<float*>(dst)[i] = own[i] * n;
      } else {
        // The same in float32, rounded once to the call's format.
        widened.resize(e.length);
        widen(format_, own_input + e.offset * bytes, widened.data(), e.length);
        const auto n = static_cast<float>(layout_.ranks());
        for (float& v : widened) v *= n;
        narrow(format_, widened.data(), dst, e.length);
      }
      ledger.fill(ledger.global_chunk(p, c), e.length);
    }
  }
  remaining_ = 0;
}

}  // namespace optireduce
