// The store of a later call's messages: bounded, and budgeted by that call's own size.
#include <gtest/gtest.h>

#include <cstring>

#include "optireduce/engine/tar/early_store.hpp"

namespace optireduce {
namespace {

WireHeader chunk_of(std::uint64_t epoch, std::uint64_t total, std::uint64_t offset, std::uint32_t length) {
  WireHeader h;
  h.kind = MessageKind::scatter_chunk;
  h.source = 1;
  h.epoch = epoch;
  h.total = total;
  h.offset = offset;
  h.length = length;
  return h;
}

InboundMessage holding(const std::vector<std::byte>& payload) {
  InboundMessage m;
  m.source = 1;
  m.payload = payload;
  m.payload_size = payload.size();
  return m;
}

TEST(EarlyStore, APeerAheadWithAMuchLargerCallLosesNothing) {
  // This rank's calls so far were tiny; the peer's next call is 64 MiB and it sends all of this
  // rank's share before this rank gets there: every byte must be kept (nothing resends it).
  EarlyStore store;
  const std::uint64_t total = 16u << 20;  // floats
  const std::uint32_t chunk = 65536;
  std::vector<std::byte> payload(chunk * sizeof(float), std::byte{0x5a});
  std::size_t kept = 0;
  for (std::uint64_t at = 0; at + chunk <= total * 3 / 4; at += chunk) kept += store.keep(chunk_of(2, total, at, chunk), 1, holding(payload));
  EXPECT_EQ(kept, total * 3 / 4 / chunk);
  EXPECT_EQ(store.bytes(), kept * payload.size());
  std::size_t replayed = 0;
  std::uint64_t stale = 0;
  store.replay(2, [&](const WireHeader& h, std::span<const std::byte> p) {
    EXPECT_EQ(h.epoch, 2u);
    EXPECT_EQ(p.size(), payload.size());
    EXPECT_EQ(p[0], std::byte{0x5a});
    ++replayed;
  }, stale);
  EXPECT_EQ(replayed, kept);
  EXPECT_EQ(stale, 0u);
  EXPECT_TRUE(store.empty());
}

TEST(EarlyStore, MoreThanACallCanBringIsRefused) {
  EarlyStore store;
  std::vector<std::byte> payload(1u << 20);
  std::size_t kept = 0;
  // A call of 1000 floats can bring at most a few MiB (the floor of the budget), never 64 MiB.
  for (int i = 0; i < 64; ++i) kept += store.keep(chunk_of(2, 1000, 0, 1000), 1, holding(payload));
  EXPECT_LT(kept, 64u);
  EXPECT_GT(kept, 0u);
  EXPECT_FALSE(store.keep(chunk_of(1 + EarlyStore::kMaxEpochsAhead + 1, 1000, 0, 10), 1, holding(payload)))
      << "too far ahead";
  EXPECT_FALSE(store.keep(chunk_of(1, 1000, 0, 10), 1, holding(payload))) << "not a later call";
}

TEST(EarlyStore, ReplayKeepsLaterCallsAndCountsEarlierOnes) {
  EarlyStore store;
  std::vector<std::byte> payload(40);
  ASSERT_TRUE(store.keep(chunk_of(3, 100, 0, 10), 1, holding(payload)));
  ASSERT_TRUE(store.keep(chunk_of(4, 100, 0, 10), 1, holding(payload)));
  ASSERT_TRUE(store.keep(chunk_of(5, 100, 0, 10), 2, holding(payload)));
  std::uint64_t stale = 0;
  int replayed = 0;
  store.replay(4, [&](const WireHeader& h, std::span<const std::byte>) { replayed += h.epoch == 4; }, stale);
  EXPECT_EQ(replayed, 1);
  EXPECT_EQ(stale, 1u) << "epoch 3 is over";
  EXPECT_EQ(store.size(), 1u) << "epoch 5 is still to come";
}

TEST(EarlyStore, ReplayedBuffersAreReusedForTheNextCall) {
  EarlyStore store;
  std::vector<std::byte> first(4000, std::byte{1}), second(4000, std::byte{2});
  for (std::uint64_t c = 0; c < 8; ++c) ASSERT_TRUE(store.keep(chunk_of(2, 8000, c * 1000, 1000), 1, holding(first)));
  EXPECT_EQ(store.spare_bytes(), 0u);
  std::uint64_t stale = 0;
  store.replay(2, [](const WireHeader&, std::span<const std::byte>) {}, stale);
  EXPECT_EQ(store.spare_bytes(), 8 * first.size()) << "the replayed payloads' buffers are kept";
  // The next call's early chunks take those buffers, and read what was written into them.
  for (std::uint64_t c = 0; c < 8; ++c) ASSERT_TRUE(store.keep(chunk_of(3, 8000, c * 1000, 1000), 2, holding(second)));
  EXPECT_EQ(store.spare_bytes(), 0u) << "every chunk reused a buffer";
  int seen = 0;
  store.replay(3, [&](const WireHeader&, std::span<const std::byte> p) {
    ASSERT_EQ(p.size(), second.size());
    EXPECT_EQ(std::memcmp(p.data(), second.data(), p.size()), 0);
    ++seen;
  }, stale);
  EXPECT_EQ(seen, 8);
  EXPECT_EQ(stale, 0u);
}

}  // namespace
}  // namespace optireduce
