// The owner's side of the scatter-reduce: contributions by chunk, the reduction in rank order,
// the scale of a partial chunk.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <vector>

#include "optireduce/engine/scatter_reduce.hpp"

namespace optireduce {
namespace {

InboundMessage holding(const std::vector<float>& values) {
  InboundMessage m;
  m.payload = std::span<const std::byte>(reinterpret_cast<const std::byte*>(values.data()), values.size() * sizeof(float));
  m.payload_size = m.payload.size();
  return m;
}

TEST(ScatterReduce, SumsInRankOrderWhateverTheArrivalOrder) {
  // Values whose float sum depends on the order: 1e8 + 1 - 1e8 is 0 or 1.
  const ShardLayout layout(12, 3, 2);  // shards of 4, chunks of 2
  const float by_rank[3] = {1e8f, 1.0f, -1e8f};
  std::vector<float> results[2];
  for (int order = 0; order < 2; ++order) {
    ScatterReduce phase;
    phase.begin(layout, 0, 1);
    const std::vector<float> own(12, by_rank[0]);
    std::vector<float> staged(12, -7.0f), output(12, -7.0f);
    const int arrival[2][2] = {{1, 2}, {2, 1}};
    for (int source : arrival[order])
      for (std::uint32_t c = 0; c < 2; ++c) ASSERT_EQ(phase.accept(source, c, holding(std::vector<float>(2, by_rank[source]))), Accepted::taken);
    while (auto c = phase.next_ready()) {
      const ReducedChunk r = phase.reduce(*c, own.data(), staged.data(), output.data());
      EXPECT_FALSE(r.partial);
    }
    EXPECT_TRUE(phase.complete());
    // The sum goes to the staged shard and the output alike; the own contribution is only read.
    EXPECT_EQ(std::memcmp(staged.data(), output.data(), 12 * sizeof(float)), 0);
    EXPECT_EQ(own, std::vector<float>(12, by_rank[0]));
    EXPECT_EQ(output[4], -7.0f);  // another rank's shard: untouched
    results[order].assign(output.begin(), output.begin() + 4);
  }
  EXPECT_EQ(std::memcmp(results[0].data(), results[1].data(), 4 * sizeof(float)), 0);
  EXPECT_EQ(results[0][0], (1e8f + 1.0f) + -1e8f);
}

// The last contribution of a chunk is summed from where the transport holds it: the same bits as
// through a slot (the sum is still by rank), and only where it is the last, whole and aligned.
TEST(ScatterReduce, TheLastContributionIsSummedWhereItIsHeldInRankOrder) {
  const ShardLayout layout(12, 3, 2);  // shards of 4, chunks of 2
  const float by_rank[3] = {1e8f, 1.0f, -1e8f};
  for (int last : {1, 2}) {
    ScatterReduce phase;
    phase.begin(layout, 0, 1);
    const std::vector<float> own(12, by_rank[0]);
    std::vector<float> output(12, -7.0f);
    const int first = 3 - last;
    const std::vector<float> held(2, by_rank[last]);
    // Not the last yet: nothing is taken in place.
    EXPECT_EQ(phase.take_last_in_place(last, 0, holding(held)), nullptr);
    ASSERT_EQ(phase.accept(first, 0, holding(std::vector<float>(2, by_rank[first]))), Accepted::taken);
    // The wrong size, or a payload not aligned for floats: copied instead.
    EXPECT_EQ(phase.take_last_in_place(last, 0, holding(std::vector<float>(1, by_rank[last]))), nullptr);
    std::vector<std::byte> misaligned(2 * sizeof(float) + 1);
    InboundMessage odd;
    odd.payload = std::span<const std::byte>(misaligned).subspan(1);
    odd.payload_size = odd.payload.size();
    ASSERT_NE(reinterpret_cast<std::uintptr_t>(odd.payload.data()) % alignof(float), 0u);  // new[] aligns the vector
    EXPECT_EQ(phase.take_last_in_place(last, 0, odd), nullptr);
    const float* lent = phase.take_last_in_place(last, 0, holding(held));
    ASSERT_EQ(lent, held.data());
    EXPECT_FALSE(phase.next_ready()) << "a chunk taken in place is reduced by the caller at once";
    EXPECT_EQ(phase.accept(last, 0, holding(held)), Accepted::duplicate);
    const ReducedChunk r = phase.reduce(0, own.data(), output.data(), nullptr, last, lent);
    EXPECT_FALSE(r.partial);
    EXPECT_EQ(output[0], (1e8f + 1.0f) + -1e8f) << "by rank, wherever the last contribution was";
    EXPECT_EQ(output[1], output[0]);
    EXPECT_EQ(output[2], -7.0f);  // the shard's other chunk: not reduced yet
  }
}

TEST(ScatterReduce, APartialChunkSumsWhatCameAndLateDataIsRefused) {
  const ShardLayout layout(8, 4, 2);  // shards of 2: one chunk each
  ScatterReduce phase;
  phase.begin(layout, 0, 1);
  std::vector<float> own(8, 1.0f);
  ASSERT_EQ(phase.accept(1, 0, holding({2.0f, 2.0f})), Accepted::taken);
  ASSERT_EQ(phase.accept(1, 0, holding({2.0f, 2.0f})), Accepted::duplicate);
  EXPECT_FALSE(phase.next_ready());
  ASSERT_EQ(phase.open_chunks(), std::vector<std::uint32_t>{0});
  const ReducedChunk r = phase.reduce(0, own.data(), own.data(), nullptr);  // the deadline: 2 of 4 contributions
  EXPECT_TRUE(r.partial);
  EXPECT_FLOAT_EQ(own[0], 1.0f + 2.0f) << "the missing contributions count as zero, never scaled up";
  EXPECT_EQ(phase.accept(2, 0, holding({5.0f, 5.0f})), Accepted::closed);
  EXPECT_DOUBLE_EQ(phase.received_fraction(), 1.0 / 3);
}

}  // namespace
}  // namespace optireduce
