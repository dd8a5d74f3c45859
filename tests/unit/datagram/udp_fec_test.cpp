// The udp transport with forward error correction (OPTIREDUCE_FEC): parity datagrams behind
// every group of data datagrams to a peer, room for them taken from the messages, and ranks that
// disagree on it refused at connect. (Repair of real losses: udp.fec_loss_* under netem.)
#include <gtest/gtest.h>

#include <atomic>
#include <set>
#include <thread>

#include "optireduce/byte_order.hpp"
#include "optireduce/datagram/fec.hpp"
#include "optireduce/udp/udp_transport.hpp"
#include "udp_pair.hpp"

namespace optireduce::testing {
namespace {

UdpSettings with_fec(unsigned group) {
  UdpSettings s;
  s.fec_group = group;
  return s;
}

TEST(UdpFec, ParityLeavesBehindEveryGroupAndEveryMessageArrivesOnce) {
  UdpPair pair = connect_udp_pair(with_fec(4));
  ASSERT_TRUE(pair.connected[0].ok()) << pair.connected[0].text();
  ASSERT_TRUE(pair.connected[1].ok()) << pair.connected[1].text();
  // A parity carries a whole member behind its own header and table: members are that much smaller.
  const std::size_t max_message = pair.rank[0]->traits().max_message_bytes;
  EXPECT_EQ(max_message, 65507u - 2 * datagram::Header::kSize - datagram::ParityEncoder::table_bytes(4));
  EXPECT_EQ(pair.rank[0]->describe(), "udp lo 65507B fec 4");

  constexpr std::uint32_t kMessages = 42;  // ten full groups, and two datagrams that linger
  std::atomic<bool> stop{false};
  const auto deadline = Clock::now() + std::chrono::seconds(20);
  // Sends reference their buffers until they leave.
  std::vector<std::vector<std::byte>> headers, payloads;
  for (std::uint32_t id = 0; id < kMessages; ++id) {
    const std::size_t bytes = id % 3 == 0 ? max_message - 8 : 1000 + id;
    headers.push_back(test_header(id, static_cast<std::uint32_t>(bytes)));
    payloads.push_back(test_payload(id, bytes));
  }
  // Only this thread touches rank 0's transport (one thread drives a transport at a time).
  std::atomic<std::uint64_t> parity_sent{0};
  std::thread sender([&] {
    for (std::uint32_t id = 0; id < kMessages; ++id) EXPECT_TRUE(pair.rank[0]->send(1, Lane::data, headers[id], payloads[id]).ok());
    while (!stop.load() && Clock::now() < deadline) {
      (void)pair.rank[0]->poll(std::min(deadline, Clock::now() + std::chrono::milliseconds(5)), [](const InboundMessage&) {});
      parity_sent = pair.rank[0]->counters().fec_parity_sent;
    }
  });
  std::multiset<std::uint32_t> got;
  std::size_t damaged = 0;
  auto on_message = [&](const InboundMessage& m) {
    const auto id = get_le<std::uint32_t>(m.header.data());
    std::vector<std::byte> copy(m.payload_size);
    if (!m.copy_payload(copy) || copy != test_payload(id, get_le<std::uint32_t>(m.header.data() + 4))) ++damaged;
    got.insert(id);
  };
  while (std::set<std::uint32_t>(got.begin(), got.end()).size() < kMessages && Clock::now() < deadline)
    (void)pair.rank[1]->poll(deadline, on_message);
  // The last, unfilled group is closed once it has lingered open (the sender keeps polling).
  while (parity_sent < 11 && Clock::now() < deadline)
    (void)pair.rank[1]->poll(std::min(deadline, Clock::now() + std::chrono::milliseconds(5)), on_message);
  stop = true;
  sender.join();

  EXPECT_EQ(damaged, 0u);
  EXPECT_EQ(got.size(), kMessages);  // nothing lost, so nothing repaired: each exactly once
  EXPECT_EQ(pair.rank[0]->counters().fec_parity_sent, 11u);
  const TransportCounters c = pair.rank[1]->counters();
  EXPECT_EQ(c.rejected(), 0u) << c.rejected_malformed << " malformed, " << c.rejected_unauthenticated << " unauthenticated, " << c.rejected_foreign_source << " foreign";
  EXPECT_EQ(c.fec_repaired, 0u);
}

// The addresses say whether a rank sends parity: a disagreement is found before any datagram.
TEST(UdpFec, RanksThatDisagreeOnItAreRefusedAtConnect) {
  Status made;
  auto with = make_started<udp::UdpTransport>(with_fec(4), made);
  auto without = make_started<udp::UdpTransport>(with_fec(0), made);
  ASSERT_TRUE(with && without) << made.text();
  const Status s = with->connect(0, {with->local_address(), without->local_address()}, Clock::now() + std::chrono::seconds(1));
  EXPECT_EQ(s.code(), StatusCode::invalid) << s.text();
  EXPECT_NE(s.message().find("OPTIREDUCE_FEC differs between ranks"), std::string::npos) << s.text();
}

}  // namespace
}  // namespace optireduce::testing
