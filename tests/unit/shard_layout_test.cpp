#include <gtest/gtest.h>

#include <map>

#include "optireduce/engine/tar/shard_layout.hpp"
#include "optireduce/engine/tar/schedule.hpp"

namespace optireduce {
namespace {

TEST(ShardLayout, ShardsAreBalancedContiguousAndCoverEverything) {
  for (int ranks = 1; ranks <= 7; ++ranks)
    for (std::uint64_t total : {0ull, 1ull, 2ull, 6ull, 7ull, 1009ull, 65537ull}) {
      ShardLayout l(total, ranks, 100);
      std::uint64_t next = 0, smallest = total, largest = 0;
      for (int p = 0; p < ranks; ++p) {
        EXPECT_EQ(l.shard_begin(p), next);
        next += l.shard_size(p);
        smallest = std::min(smallest, l.shard_size(p));
        largest = std::max(largest, l.shard_size(p));
      }
      EXPECT_EQ(next, total);
      EXPECT_LE(largest - smallest, 1u);
      EXPECT_EQ(l.max_chunks(), l.chunks_in_shard(0));
    }
}

TEST(ShardLayout, ChunksTileEachShardAndOnlyExactChunksAreRecognised) {
  ShardLayout l(1000, 3, 64);  // shards of 334, 333, 333
  for (int p = 0; p < 3; ++p) {
    std::uint64_t covered = 0;
    for (std::uint32_t c = 0; c < l.chunks_in_shard(p); ++c) {
      const Extent e = l.chunk(p, c);
      EXPECT_EQ(e.offset, l.shard_begin(p) + covered);
      EXPECT_EQ(l.chunk_index(p, e.offset, e.length), c);
      EXPECT_FALSE(l.chunk_index(p, e.offset, e.length + 1));
      EXPECT_FALSE(l.chunk_index(p, e.offset + 1, e.length));
      covered += e.length;
    }
    EXPECT_EQ(covered, l.shard_size(p));
  }
  EXPECT_FALSE(l.chunk_index(1, 0, 64)) << "offset inside another shard";
  EXPECT_FALSE(l.chunk_index(2, 1000, 0)) << "past the end";
}

TEST(TarSchedule, EveryPeerChunkOnceInterleavedByPeer) {
  ShardLayout l(1000, 4, 64);
  for (int rank = 0; rank < 4; ++rank) {
    std::vector<ScheduledSend> sends;
    for_each_scatter_send(l, rank, kLastSlicesInOrder, [&](const ScheduledSend& s) {
      sends.push_back(s);
      return true;
    });
    std::map<std::pair<int, std::uint32_t>, int> seen;
    for (const auto& s : sends) {
      EXPECT_NE(s.peer, rank);
      ++seen[{s.peer, s.chunk}];
      EXPECT_EQ(s.last_slice, s.chunk + 1 == l.chunks_in_shard(s.peer));
      EXPECT_EQ(s.follow, l.chunks_in_shard(s.peer) - 1 - s.chunk);
    }
    std::size_t expected = 0;
    for (int p = 0; p < 4; ++p)
      if (p != rank) expected += l.chunks_in_shard(p);
    EXPECT_EQ(sends.size(), expected);
    for (auto& [key, n] : seen) EXPECT_EQ(n, 1);
    // The first round goes to r+1, r+2, r+3 in that order.
    ASSERT_GE(sends.size(), 3u);
    for (int k = 0; k < 3; ++k) EXPECT_EQ(sends[k].peer, (rank + 1 + k) % 4);
  }
}

}  // namespace
}  // namespace optireduce
