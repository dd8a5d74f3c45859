// The owner's side of the scatter-reduce: contributions by chunk, the reduction in one fixed
// order whatever the arrival order, contributions added where the transport holds them, a
// partial chunk.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <vector>

#include "optireduce/engine/tar/scatter_reduce.hpp"

namespace optireduce {
namespace {

InboundMessage holding(std::span<const std::byte> bytes) {
  InboundMessage m;
  m.payload = bytes;
  m.payload_size = m.payload.size();
  return m;
}

InboundMessage holding(const std::vector<float>& values) {
  return holding(std::span<const std::byte>(reinterpret_cast<const std::byte*>(values.data()), values.size() * sizeof(float)));
}

// Values whose float sum depends on the order: 1e8 + 1 - 1e8 is 0 or 1.
constexpr float kByRank[3] = {1e8f, 1.0f, -1e8f};
// Owner 0 of 3 sums its own, then rank 2 (rank-1), then rank 1 (rank-2).
constexpr float kOwnersOrder = (kByRank[0] + kByRank[2]) + kByRank[1];
static_assert(kOwnersOrder != (kByRank[0] + kByRank[1]) + kByRank[2], "the values must tell the orders apart");

TEST(ScatterReduce, SumsInTheOwnersOrderWhateverTheArrivalOrder) {
  const ShardLayout layout(12, 3, 2);  // shards of 4, chunks of 2
  for (bool add_on_arrival : {true, false}) {
    const int arrival[2][2] = {{2, 1}, {1, 2}};
    for (const auto& order : arrival) {
      ScatterReduce phase;
      phase.begin(layout, 0, 1);
      const std::vector<float> own(12, kByRank[0]);
      std::vector<float> staged(12, -7.0f), output(12, -7.0f);
      phase.bind(own.data(), staged.data(), output.data(), add_on_arrival);
      for (int source : order)
        for (std::uint32_t c = 0; c < 2; ++c) ASSERT_EQ(phase.accept(source, c, holding(std::vector<float>(2, kByRank[source]))), Accepted::taken);
      int ready = 0;
      while (auto c = phase.next_ready()) {
        const ReducedChunk r = phase.reduce(*c);
        EXPECT_FALSE(r.partial);
        ++ready;
      }
      EXPECT_EQ(ready, 2);
      EXPECT_TRUE(phase.complete());
      // The sum goes to the staged shard and the output alike; the own contribution is only read.
      EXPECT_EQ(std::memcmp(staged.data(), output.data(), 4 * sizeof(float)), 0);
      EXPECT_EQ(own, std::vector<float>(12, kByRank[0]));
      EXPECT_EQ(output[4], -7.0f);  // another rank's shard: untouched
      for (int i = 0; i < 4; ++i) EXPECT_EQ(output[i], kOwnersOrder) << "arrival " << order[0] << "," << order[1];
      // In its turn (rank 2 first) each contribution is added where it is held; ahead of its turn
      // (rank 1 first) it waits in a slot.
      const std::uint64_t in_slots = !add_on_arrival ? 4 : order[0] == 2 ? 0 : 2;
      EXPECT_EQ(phase.waited_in_slot(), in_slots);
      EXPECT_EQ(phase.added_on_arrival(), 4 - in_slots);
    }
  }
}

TEST(ScatterReduce, AddsContributionsHeldAtAnyByteAddressAndWritesTheOutputOnceComplete) {
  const ShardLayout layout(12, 3, 4);  // shards of 4, one chunk each
  ScatterReduce phase;
  phase.begin(layout, 0, 1);
  std::vector<float> inout(12, kByRank[0]), output(12, -7.0f);
  // The own shard is also where the sums go (an in-place caller), the output a second copy.
  phase.bind(inout.data(), inout.data(), output.data(), true);
  std::vector<std::byte> buffer(4 * sizeof(float) + 3);
  for (int offset : {1, 3}) {
    const int source = offset == 1 ? 2 : 1;
    for (int i = 0; i < 4; ++i) std::memcpy(buffer.data() + offset + i * sizeof(float), &kByRank[source], sizeof(float));
    const auto bytes = std::span<const std::byte>(buffer).subspan(static_cast<std::size_t>(offset), 4 * sizeof(float));
    ASSERT_NE(reinterpret_cast<std::uintptr_t>(bytes.data()) % alignof(float), 0u);
    ASSERT_EQ(phase.accept(source, 0, holding(bytes)), Accepted::taken);
    if (source == 2) {
      EXPECT_EQ(output[0], -7.0f) << "an incomplete chunk's running sum is not the output's yet";
      EXPECT_FALSE(phase.next_ready());
    }
  }
  EXPECT_EQ(phase.waited_in_slot(), 0u);
  ASSERT_EQ(phase.next_ready(), std::optional<std::uint32_t>(0));
  EXPECT_FALSE(phase.reduce(0).partial);
  for (int i = 0; i < 4; ++i) {
    EXPECT_EQ(inout[i], kOwnersOrder);
    EXPECT_EQ(output[i], kOwnersOrder);
  }
  EXPECT_EQ(phase.accept(1, 0, holding(std::vector<float>(4, 5.0f))), Accepted::duplicate);
}

TEST(ScatterReduce, APayloadTheTransportDoesNotHoldIsFetchedIntoASlot) {
  const ShardLayout layout(6, 3, 2);  // shards of 2: one chunk each
  ScatterReduce phase;
  phase.begin(layout, 0, 1);
  const std::vector<float> own(6, kByRank[0]);
  std::vector<float> output(6, -7.0f);
  phase.bind(own.data(), output.data(), nullptr, true);
  const std::vector<float> remote(2, kByRank[2]);
  InboundMessage fetched;
  fetched.payload_held = false;
  fetched.payload_size = 2 * sizeof(float);
  fetched.fetch = [&](std::span<std::byte> dst) {
    std::memcpy(dst.data(), remote.data(), dst.size());
    return true;
  };
  ASSERT_EQ(phase.accept(2, 0, fetched), Accepted::taken);
  InboundMessage refused = fetched;
  refused.fetch = [](std::span<std::byte>) { return false; };
  EXPECT_EQ(phase.accept(1, 0, refused), Accepted::unreadable);
  ASSERT_EQ(phase.accept(1, 0, holding(std::vector<float>(2, kByRank[1]))), Accepted::taken);
  ASSERT_TRUE(phase.next_ready());
  phase.reduce(0);
  EXPECT_EQ(output[0], kOwnersOrder);
  EXPECT_EQ(phase.waited_in_slot(), 1u);
}

TEST(ScatterReduce, APartialChunkSumsWhatCameInOrderAndLateDataIsRefused) {
  const ShardLayout layout(8, 4, 2);  // shards of 2: one chunk each
  ScatterReduce phase;
  phase.begin(layout, 0, 1);
  std::vector<float> own(8, 1.0f), output(8, -7.0f);
  phase.bind(own.data(), own.data(), output.data(), true);
  // Owner 0 of 4 sums 0, 3, 2, 1: rank 2 comes ahead of its turn (rank 3 never comes).
  ASSERT_EQ(phase.accept(2, 0, holding({2.0f, 2.0f})), Accepted::taken);
  ASSERT_EQ(phase.accept(2, 0, holding({2.0f, 2.0f})), Accepted::duplicate);
  ASSERT_EQ(phase.accept(1, 0, holding({4.0f, 4.0f})), Accepted::taken);
  EXPECT_FALSE(phase.next_ready());
  EXPECT_EQ(output[0], -7.0f);
  ASSERT_EQ(phase.open_chunks(), std::vector<std::uint32_t>{0});
  EXPECT_EQ(phase.open_entries(), 2u);
  const ReducedChunk r = phase.reduce(0);  // the deadline: 3 of 4 contributions
  EXPECT_TRUE(r.partial);
  EXPECT_TRUE(phase.reduced_partial(0));
  EXPECT_FLOAT_EQ(own[0], 1.0f + 2.0f + 4.0f) << "the missing contribution counts as zero, never scaled up";
  EXPECT_EQ(output[0], own[0]);
  EXPECT_EQ(phase.accept(3, 0, holding({5.0f, 5.0f})), Accepted::closed);
  EXPECT_DOUBLE_EQ(phase.received_fraction(), 2.0 / 3);
}

TEST(ScatterReduce, ASingleRankCopiesItsOwnShard) {
  const ShardLayout layout(4, 1, 2);
  ScatterReduce phase;
  phase.begin(layout, 0, 1);
  const std::vector<float> own = {1, 2, 3, 4};
  std::vector<float> staged(4, 0.0f), output(4, 0.0f);
  phase.bind(own.data(), staged.data(), output.data(), true);
  while (auto c = phase.next_ready()) phase.reduce(*c);
  EXPECT_TRUE(phase.complete());
  EXPECT_EQ(staged, own);
  EXPECT_EQ(output, own);
}

}  // namespace
}  // namespace optireduce
