#include "optireduce/engine/tar/fill_agreement.hpp"

#include <algorithm>
#include <cstring>

namespace optireduce {

void FillAgreement::begin(const ShardLayout& layout, std::uint64_t total_chunks, std::size_t max_piece_bytes, int rank,
                          std::span<const std::byte> rider) {
  layout_ = layout;
  bitmap_bytes_ = static_cast<std::size_t>((total_chunks + 7) / 8);
  rider_bytes_ = rider.size();
  list_bytes_ = bitmap_bytes_ + rider_bytes_;
  piece_bytes_ = std::max<std::size_t>(1, max_piece_bytes);
  pieces_per_rank_ = list_bytes_ ? (list_bytes_ + piece_bytes_ - 1) / piece_bytes_ : 0;
  riders_.resize(static_cast<std::size_t>(layout.ranks()));
  for (auto& r : riders_) r.assign(rider_bytes_, std::byte{0});
  if (rank >= 0 && rank < layout.ranks()) std::copy(rider.begin(), rider.end(), riders_[static_cast<std::size_t>(rank)].begin());
  union_.assign(bitmap_bytes_, std::byte{0});
  pieces_.assign(static_cast<std::size_t>(layout.ranks()) * pieces_per_rank_, 0);
  pieces_in_.assign(static_cast<std::size_t>(layout.ranks()), 0);
  complete_sources_ = 0;
  decided_.assign(static_cast<std::size_t>(layout.ranks()), 0);
}

bool FillAgreement::union_empty() const {
  return std::all_of(union_.begin(), union_.end(), [](std::byte b) { return b == std::byte{0}; });
}

bool FillAgreement::all_decided(int rank) const {
  for (std::size_t p = 0; p < decided_.size(); ++p)
    if (static_cast<int>(p) != rank && !decided_[p]) return false;
  return true;
}

void FillAgreement::build_own_list(const AllGather* gather, const LossLedger& ledger, int rank,
                                   std::vector<std::byte>& mine) {
  mine.assign(list_bytes_, std::byte{0});
  for (int p = 0; p < layout_.ranks(); ++p)
    for (std::uint32_t c = 0; c < layout_.chunks_in_shard(p); ++c)
      if (p != rank && gather && !gather->has(p, c)) {
        const std::uint64_t g = ledger.global_chunk(p, c);
        mine[g / 8] |= std::byte{static_cast<unsigned char>(1u << (g % 8))};
      }
  for (std::size_t i = 0; i < bitmap_bytes_; ++i) union_[i] |= mine[i];
  const auto& rider = riders_[static_cast<std::size_t>(rank)];
  std::copy(rider.begin(), rider.end(), mine.begin() + static_cast<std::ptrdiff_t>(bitmap_bytes_));
}

void FillAgreement::for_each_piece(const std::vector<std::byte>& mine,
                                   const std::function<void(std::uint64_t, std::span<const std::byte>)>& send) const {
  for (std::size_t at = 0; at < list_bytes_; at += piece_bytes_)
    send(at, std::span<const std::byte>(mine).subspan(at, std::min(piece_bytes_, list_bytes_ - at)));
}

std::optional<std::size_t> FillAgreement::piece_of(const WireHeader& h, std::size_t payload_size) const {
  if (h.total != layout_.total() || h.offset % piece_bytes_ != 0) return std::nullopt;
  if (((h.flags & WireHeader::kFlagFigures) != 0) != carries_riders()) return std::nullopt;
  const std::uint64_t piece = h.offset / piece_bytes_;
  if (piece >= pieces_per_rank_ || payload_size != h.length || h.length != std::min(piece_bytes_, list_bytes_ - h.offset))
    return std::nullopt;
  return piece;
}

void FillAgreement::accept(int source, std::size_t piece, const WireHeader& h, const InboundMessage& message) {
  auto& seen = pieces_[static_cast<std::size_t>(source) * pieces_per_rank_ + piece];
  if (seen) return;  // the second copy
  scratch_.resize(h.length);
  if (!message.copy_payload(scratch_)) return;
  seen = 1;
  auto& rider = riders_[static_cast<std::size_t>(source)];
  for (std::size_t i = 0; i < scratch_.size(); ++i) {
    const std::size_t at = h.offset + i;
    if (at < bitmap_bytes_) union_[at] |= scratch_[i];
    else rider[at - bitmap_bytes_] = scratch_[i];
  }
  if (++pieces_in_[source] == pieces_per_rank_) ++complete_sources_;
}

void FillAgreement::apply_union(AllGather& gather, std::byte* target, std::size_t element_bytes, LossLedger& ledger, int rank,
                                const std::function<void(int)>& changed) const {
  for (int p = 0; p < layout_.ranks(); ++p)
    for (std::uint32_t c = 0; c < layout_.chunks_in_shard(p); ++c) {
      const std::uint64_t g = ledger.global_chunk(p, c);
      if (!in_union(g)) continue;
      // A chunk this rank lacks too is filled (and counted) by AllGather::fill_missing.
      if (p != rank && !gather.has(p, c)) continue;
      const Extent e = layout_.chunk(p, c);
      std::memset(target + e.offset * element_bytes, 0, e.length * element_bytes);
      ledger.fill(g, e.length);
      changed(p);
    }
}

}  // namespace optireduce
