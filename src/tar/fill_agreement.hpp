// The end of a bounded call: every rank tells every other which all-gather chunks it lacks, and
// each fills the union of those lists, so replicas stay bitwise identical even where the
// network lost different chunks at different ranks. The lists are bitmaps over all chunks of
// the call, cut into pieces that fit one message, each piece sent twice (on a network that loses
// a fraction p of messages an agreement then fails with about (N-1) p^2 instead of (N-1) p).
// A list may carry a rider: bytes of the same length from every rank, after its bitmap (the loss
// window's figures: deadlines/agreements.hpp). A rank that has every list holds every rank's rider.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <vector>

#include "optireduce/engine/tar/all_gather.hpp"
#include "optireduce/engine/deadlines/loss_ledger.hpp"
#include "optireduce/engine/tar/wire_header.hpp"

namespace optireduce {

class FillAgreement {
 public:
  // How many times each list is sent: once where the transport delivers every send, twice where
  // it may lose one (a lost list leaves replicas apart).
  static int copies(bool reliable_transport) { return reliable_transport ? 1 : 2; }

  // `rider`: this rank's, where the call's lists carry one (the same length on every rank).
  void begin(const ShardLayout& layout, std::uint64_t total_chunks, std::size_t max_piece_bytes, int rank = -1,
             std::span<const std::byte> rider = {});
  std::size_t pieces_per_rank() const { return pieces_per_rank_; }
  // This call's lists carry riders (their pieces say so: WireHeader::kFlagFigures).
  bool carries_riders() const { return rider_bytes_ > 0; }
  // Every rank's rider, by rank (this rank's own included); complete once every list came.
  const std::vector<std::vector<std::byte>>& riders() const { return riders_; }

  // This rank's list, from what its all-gather holds, then its rider. Always the whole of it, however much that
  // is: a rank that kept a large loss to itself would leave the replicas apart for good, where
  // filling it everywhere costs one call (and the loss budget's window then turns to exact calls).
  // A reduce-scatter has no all-gather (null): its list names no chunk, and says only that its
  // block is closed (TarCall::finish_reduce_scatter).
  void build_own_list(const AllGather* gather, const LossLedger& ledger, int rank, std::vector<std::byte>& mine);
  // Calls send(offset, piece) for every piece of `mine` (the caller sends it to every peer).
  void for_each_piece(const std::vector<std::byte>& mine,
                      const std::function<void(std::uint64_t offset, std::span<const std::byte> piece)>& send) const;

  // Validates a received piece (geometry, and whether it says it carries a rider as this call's
  // lists do; nothing changes). The piece index when it fits.
  std::optional<std::size_t> piece_of(const WireHeader& h, std::size_t payload_size) const;
  // A validated piece of `source`'s list.
  void accept(int source, std::size_t piece, const WireHeader& h, const InboundMessage& message);
  bool complete(int ranks) const { return complete_sources_ == static_cast<std::size_t>(ranks - 1); }
  bool has_list(int source) const { return pieces_in_[static_cast<std::size_t>(source)] == pieces_per_rank_; }
  // No rank lacks anything among the lists that came (and the own).
  bool union_empty() const;

  // A calibration call made exact by resends decides from the lists whether it was exact
  // everywhere (TarCall::decide_exactness); each peer says when it has decided.
  void note_decided(int source) { decided_[static_cast<std::size_t>(source)] = 1; }
  bool all_decided(int rank) const;
  bool decided(int source) const { return decided_[static_cast<std::size_t>(source)] != 0; }

  // Closes the union on this rank: a chunk some rank lacks is zeroed here too (even where it
  // arrived, and at its owner), counted as filled. Calls changed(owner) for every shard touched.
  // `target` holds elements of `element_bytes` each.
  void apply_union(AllGather& gather, std::byte* target, std::size_t element_bytes, LossLedger& ledger, int rank,
                   const std::function<void(int owner)>& changed) const;

 private:
  bool in_union(std::uint64_t g) const {
    return (union_[g / 8] & std::byte{static_cast<unsigned char>(1u << (g % 8))}) != std::byte{0};
  }

  ShardLayout layout_;
  std::size_t bitmap_bytes_ = 0, piece_bytes_ = 0, pieces_per_rank_ = 0;
  std::size_t rider_bytes_ = 0, list_bytes_ = 0;  // a list: its bitmap, then its rider
  std::vector<std::vector<std::byte>> riders_;    // [source]: the riders that came, and the own
  std::vector<std::byte> union_;         // OR of the lists that came this call, and the own
  std::vector<std::uint8_t> pieces_;     // [source][piece]: pieces that came
  std::vector<std::uint32_t> pieces_in_; // per source: pieces that came
  std::vector<std::uint8_t> decided_;    // per source: said it has decided
  std::size_t complete_sources_ = 0;
  std::vector<std::byte> scratch_;
};

}  // namespace optireduce
