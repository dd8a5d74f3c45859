#include "optireduce/engine/tar/all_gather.hpp"

#include <cstring>

namespace optireduce {

void AllGather::begin(const ShardLayout& layout, int rank) {
  layout_ = layout;
  rank_ = rank;
  seen_.assign(static_cast<std::size_t>(layout.ranks()) * layout.max_chunks(), 0);
  pending_.assign(static_cast<std::size_t>(layout.ranks()), 0);
  remaining_ = 0;
  for (int p = 0; p < layout.ranks(); ++p)
    if (p != rank) remaining_ += pending_[p] = layout.chunks_in_shard(p);
  expected_ = remaining_;
  last_arrival_ = Clock::now();
}

Accepted AllGather::accept(int owner, std::uint32_t chunk, const InboundMessage& message, float* target) {
  auto& seen = seen_[index(owner, chunk)];
  if (seen) return Accepted::duplicate;
  const Extent e = layout_.chunk(owner, chunk);
  if (!message.copy_payload({reinterpret_cast<std::byte*>(target + e.offset), e.length * sizeof(float)}))
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

void AllGather::fill_missing(float* target, FillPolicy policy, const float* own_input, LossLedger& ledger) {
  for (int p = 0; p < layout_.ranks(); ++p) {
    if (p == rank_) continue;
    for (std::uint32_t c = 0; c < layout_.chunks_in_shard(p); ++c) {
      auto& seen = seen_[index(p, c)];
      if (seen) continue;
      seen = 1;
      const Extent e = layout_.chunk(p, c);
      float* dst = target + e.offset;
      if (policy == FillPolicy::zero) {
        std::memset(dst, 0, e.length * sizeof(float));
      } else {
        // This rank's own contribution times N: an unbiased guess of the sum.
        const float* own = own_input + e.offset;
        const auto n = static_cast<float>(layout_.ranks());
        for (std::uint32_t i = 0; i < e.length; ++i) dst[i] = own[i] * n;
      }
      ledger.fill(ledger.global_chunk(p, c), e.length);
    }
  }
  remaining_ = 0;
}

}  // namespace optireduce
