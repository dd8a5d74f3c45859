// Segmentation for GSO sends (which datagrams one send carries) and the receive path's GRO
// splitting (boundaries, a short last segment, a truncated or oversized datagram inside a run,
// a buffer the kernel truncated), each segment validated on its own.
#include <gtest/gtest.h>

#include <arpa/inet.h>

#include "datagram_job.hpp"
#include "optireduce/udp/receive_path.hpp"
#include "optireduce/udp/segmentation.hpp"

namespace optireduce::testing {
namespace {

using datagram::Kind;
using udp::GroSegments;
using udp::gso_run_length;

std::size_t run(const std::vector<std::size_t>& sizes, std::size_t max_bytes = 65507) {
  return gso_run_length(sizes.size(), [&](std::size_t i) { return sizes[i]; }, max_bytes);
}

TEST(GsoRun, TakesEqualDatagramsAndOneShorterLast) {
  EXPECT_EQ(run({}), 0u);
  EXPECT_EQ(run({1372}), 1u);
  EXPECT_EQ(run({1372, 1372, 1372}), 3u);
  EXPECT_EQ(run({1372, 1372, 900, 1372}), 3u);   // the shorter one ends the run
  EXPECT_EQ(run({1372, 1372, 1400, 1372}), 2u);  // a longer one starts the next
  EXPECT_EQ(run({900, 1372}), 1u);
}

TEST(GsoRun, StaysWithinTheSegmentAndByteLimits) {
  EXPECT_EQ(run(std::vector<std::size_t>(100, 1372)), 47u);    // 47 x 1372 <= 65507 < 48 x 1372
  EXPECT_EQ(run(std::vector<std::size_t>(100, 100)), udp::kMaxGsoSegments);
  EXPECT_EQ(run(std::vector<std::size_t>(100, 1372), 5000), 3u);  // what the window allows
  EXPECT_EQ(run({1372, 1372}, 1000), 0u);
}

TEST(GroSegments, SplitsAtTheSegmentSizeWithAShortLastOne) {
  const auto buffer = pattern(1372 * 3 + 500);
  const GroSegments s(buffer, 1372);
  ASSERT_EQ(s.size(), 4u);
  for (std::size_t i = 0; i < 3; ++i) {
    EXPECT_EQ(s[i].size(), 1372u);
    EXPECT_EQ(s[i].data(), buffer.data() + i * 1372);
  }
  EXPECT_EQ(s[3].size(), 500u);
  const auto exact = pattern(1372 * 2);
  EXPECT_EQ(GroSegments(exact, 1372).size(), 2u);
  EXPECT_EQ(GroSegments(exact, 1372)[1].size(), 1372u);
  EXPECT_EQ(GroSegments(exact, 0).size(), 1u);  // no offload: one datagram
  EXPECT_EQ(GroSegments(exact, 0)[0].size(), exact.size());
  const std::vector<std::byte> none;
  ASSERT_EQ(GroSegments(none, 0).size(), 1u);  // an empty datagram is still one, to be rejected
  EXPECT_TRUE(GroSegments(none, 0)[0].empty());
}

// Rank 1 -> rank 0 through rank 0's receive path, as recvmmsg hands it buffers.
struct Receiver {
  DatagramJob job{2};
  TransportCounters counters;
  datagram::ReceiveDispatch dispatch{0, 2, job.auth(0), 0, 1372};
  sockaddr_in rank0{}, rank1{}, stranger{};
  std::unique_ptr<udp::ReceivePath> path;
  RecordingSink sink;

  Receiver() {
    for (auto* a : {&rank0, &rank1, &stranger}) {
      a->sin_family = AF_INET;
      a->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    }
    rank0.sin_port = htons(1000), rank1.sin_port = htons(1001), stranger.sin_port = htons(1002);
    path = std::make_unique<udp::ReceivePath>(dispatch, std::vector<sockaddr_in>{rank0, rank1}, counters);
  }
  std::vector<std::byte> datagram(std::size_t payload) { return job.datagram(1, 0, Kind::data, pattern(56), pattern(payload)); }
  void deliver(const std::vector<std::byte>& buffer, std::size_t segment, bool truncated = false,
               const sockaddr_in* from = nullptr) {
    path->deliver(buffer, segment, truncated, from ? *from : rank1, Clock::now(), sink);
  }
};

std::vector<std::byte> joined(const std::vector<std::vector<std::byte>>& parts) {
  std::vector<std::byte> out;
  for (const auto& p : parts) out.insert(out.end(), p.begin(), p.end());
  return out;
}

TEST(ReceivePath, ValidatesEachSegmentOfAJoinedBufferAlone) {
  Receiver r;
  const std::size_t full = 1372 - datagram::Header::kSize - 56;
  r.deliver(joined({r.datagram(full), r.datagram(full), r.datagram(full), r.datagram(100)}), 1372);
  ASSERT_EQ(r.sink.data.size(), 4u);
  EXPECT_EQ(r.sink.data[3].payload, pattern(100));
  EXPECT_EQ(r.counters.rejected(), 0u);
  // A datagram in the middle whose header claims more than its segment: it alone is rejected.
  auto middle = r.datagram(full);
  middle[12] = std::byte{0xff};
  r.deliver(joined({r.datagram(full), middle, r.datagram(full)}), 1372);
  EXPECT_EQ(r.sink.data.size(), 6u);
  EXPECT_EQ(r.counters.rejected_malformed, 1u);
  // A short datagram split at the wrong size: every piece fails on its own.
  r.deliver(joined({r.datagram(full), r.datagram(full)}), 1000);
  EXPECT_EQ(r.sink.data.size(), 6u);
  EXPECT_EQ(r.counters.rejected_malformed, 1u + 3u);
}

TEST(ReceivePath, RejectsTruncatedOversizedAndStrangersBuffers) {
  Receiver r;
  auto d = r.datagram(500);
  r.deliver(d, 0, /*truncated=*/true);
  EXPECT_EQ(r.counters.rejected_malformed, 1u);
  auto longer = d;
  longer.push_back(std::byte{0});
  r.deliver(longer, 0);
  r.deliver({d.begin(), d.end() - 1}, 0);
  EXPECT_EQ(r.counters.rejected_malformed, 3u);
  r.deliver(std::vector<std::byte>(2000), 0);  // longer than the path's datagrams
  EXPECT_EQ(r.counters.rejected_malformed, 4u);
  r.deliver(d, 0, false, &r.stranger);
  EXPECT_EQ(r.counters.rejected_unauthenticated, 1u);
  r.deliver(d, 0, false, &r.rank0);  // rank 0's own address
  EXPECT_EQ(r.counters.rejected_foreign_source, 1u);
  EXPECT_TRUE(r.sink.data.empty());
  r.deliver(d, 0);
  EXPECT_EQ(r.sink.data.size(), 1u);
}

TEST(ReceivePath, KnowsTheRanksByTheirEndpoints) {
  Receiver r;
  EXPECT_EQ(r.path->origin_of(r.rank0), 0);
  EXPECT_EQ(r.path->origin_of(r.rank1), 1);
  EXPECT_EQ(r.path->origin_of(r.stranger), -1);
  sockaddr_in other_host = r.rank1;
  other_host.sin_addr.s_addr = htonl(0x7f000002u);
  EXPECT_EQ(r.path->origin_of(other_host), -1);
}

}  // namespace
}  // namespace optireduce::testing
