// The end-of-call fill agreement: lists of missing chunks, their pieces, and the union.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <utility>
#include <vector>

#include "optireduce/engine/tar/fill_agreement.hpp"

namespace optireduce {
namespace {

TEST(FillAgreement, TheUnionOfTheListsIsFilledEverywhere) {
  const ShardLayout layout(40, 2, 5);  // shards of 20, 4 chunks each, 8 chunks in all
  LossLedger ledger;
  ledger.begin(layout);
  AllGather gather;
  gather.begin(layout, 0);
  std::vector<float> target(40, 7.0f);
  auto* bytes = reinterpret_cast<std::byte*>(target.data());
  std::vector<float> chunk(5, 3.0f);
  InboundMessage m;
  m.payload = std::span<const std::byte>(reinterpret_cast<const std::byte*>(chunk.data()), 20);
  m.payload_size = 20;
  for (std::uint32_t c : {0u, 1u, 3u}) ASSERT_EQ(gather.accept(1, c, m, bytes), Accepted::taken);  // chunk 2 lost

  FillAgreement fill;
  fill.begin(layout, ledger.total_chunks(), 1);  // one byte per piece
  std::vector<std::byte> mine;
  fill.build_own_list(&gather, ledger, 0, mine);
  ASSERT_EQ(mine.size(), 1u);
  EXPECT_EQ(mine[0], std::byte{1u << 6}) << "global chunk 4 + 2";
  // The peer lacks chunk 1 of this rank's shard.
  WireHeader h;
  h.kind = MessageKind::missing_list;
  h.total = 40;
  h.offset = 0;
  h.length = 1;
  const std::array<std::byte, 1> theirs{std::byte{1u << 1}};
  InboundMessage list;
  list.payload = theirs;
  list.payload_size = 1;
  const auto piece = fill.piece_of(h, 1);
  ASSERT_TRUE(piece);
  fill.accept(1, *piece, h, list);
  EXPECT_TRUE(fill.complete(2));
  int changed = 0;
  fill.apply_union(gather, bytes, sizeof(float), ledger, 0, [&](int owner) { changed += owner == 0; });
  gather.fill_missing(bytes, FillPolicy::zero, bytes, ledger);
  EXPECT_EQ(changed, 1);
  for (int i = 5; i < 10; ++i) EXPECT_EQ(target[i], 0.0f) << "own chunk 1, lacked by the peer";
  for (int i = 30; i < 35; ++i) EXPECT_EQ(target[i], 0.0f) << "chunk 2 of shard 1, lost here";
  EXPECT_EQ(target[20], 3.0f);
  EXPECT_EQ(ledger.dropped(), 10u);
  EXPECT_EQ(ledger.filled(), 10u);
}

TEST(FillAgreement, PiecesThatDoNotFitAreRefused) {
  const ShardLayout layout(4000, 2, 5);  // 800 chunks: a 100-byte list
  LossLedger ledger;
  ledger.begin(layout);
  FillAgreement fill;
  fill.begin(layout, ledger.total_chunks(), 64);  // two pieces: 64 and 36 bytes
  WireHeader h;
  h.total = 4000;
  h.offset = 64;
  h.length = 36;
  EXPECT_TRUE(fill.piece_of(h, 36));
  EXPECT_FALSE(fill.piece_of(h, 35)) << "payload shorter than the header";
  h.offset = 32;
  EXPECT_FALSE(fill.piece_of(h, 36)) << "not a piece boundary";
  h.offset = 128;
  EXPECT_FALSE(fill.piece_of(h, 36)) << "past the list";
  h.offset = 0;
  h.length = 36;
  EXPECT_FALSE(fill.piece_of(h, 36)) << "a first piece is 64 bytes";
  h.total = 4001;
  h.length = 64;
  EXPECT_FALSE(fill.piece_of(h, 64)) << "another call";
}

TEST(FillAgreement, ARiderFollowsTheBitmapAcrossPiecesAndReachesEveryRank) {
  const ShardLayout layout(40, 2, 5);  // 8 chunks: a one-byte bitmap
  LossLedger ledger;
  ledger.begin(layout);
  AllGather gather;
  gather.begin(layout, 0);
  const std::array<std::byte, 5> own{std::byte{1}, std::byte{2}, std::byte{3}, std::byte{4}, std::byte{5}};
  FillAgreement fill;
  fill.begin(layout, ledger.total_chunks(), 4, 0, own);  // a 6-byte list: pieces of 4 and 2 bytes
  ASSERT_TRUE(fill.carries_riders());
  EXPECT_EQ(fill.pieces_per_rank(), 2u);
  std::vector<std::byte> mine;
  fill.build_own_list(&gather, ledger, 0, mine);
  ASSERT_EQ(mine.size(), 6u);
  EXPECT_EQ(mine[0], std::byte{0xf0}) << "the peer's four chunks, none of which came";
  EXPECT_TRUE(std::equal(own.begin(), own.end(), mine.begin() + 1));
  std::vector<std::pair<std::uint64_t, std::size_t>> pieces;
  fill.for_each_piece(mine, [&](std::uint64_t at, std::span<const std::byte> piece) { pieces.emplace_back(at, piece.size()); });
  EXPECT_EQ(pieces, (std::vector<std::pair<std::uint64_t, std::size_t>>{{0, 4}, {4, 2}}));

  // The peer's list: it lacks nothing; its rider is 9 8 7 6 5.
  const std::array<std::byte, 6> theirs{std::byte{0}, std::byte{9}, std::byte{8}, std::byte{7}, std::byte{6}, std::byte{5}};
  WireHeader h;
  h.kind = MessageKind::missing_list;
  h.total = 40;
  h.flags = WireHeader::kFlagFigures;
  for (std::uint64_t at : {4u, 0u}) {
    h.offset = at;
    h.length = at ? 2 : 4;
    InboundMessage m;
    m.payload = std::span<const std::byte>(theirs).subspan(at, h.length);
    m.payload_size = h.length;
    h.flags = 0;
    EXPECT_FALSE(fill.piece_of(h, h.length)) << "a piece that does not say it carries the figures";
    h.flags = WireHeader::kFlagFigures;
    const auto piece = fill.piece_of(h, h.length);
    ASSERT_TRUE(piece) << "offset " << at;
    EXPECT_FALSE(fill.complete(2));
    fill.accept(1, *piece, h, m);
  }
  ASSERT_TRUE(fill.complete(2));
  EXPECT_TRUE(std::equal(own.begin(), own.end(), fill.riders()[0].begin()));
  EXPECT_TRUE(std::equal(theirs.begin() + 1, theirs.end(), fill.riders()[1].begin()));
  EXPECT_FALSE(fill.union_empty()) << "this rank's own lack";

  // A call whose lists carry nothing refuses a piece that says it does.
  fill.begin(layout, ledger.total_chunks(), 4);
  EXPECT_FALSE(fill.carries_riders());
  h.offset = 0;
  h.length = 1;
  EXPECT_FALSE(fill.piece_of(h, 1));
  h.flags = 0;
  EXPECT_TRUE(fill.piece_of(h, 1));
}

}  // namespace
}  // namespace optireduce
