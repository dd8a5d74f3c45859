// Two udp transports of one process over loopback (and over an outward interface where there is
// one, which takes the GSO path): connection, messages of every size on both lanes, abandoned
// sends, a stranger spraying datagrams at the port, a peer that never answers.
#include <gtest/gtest.h>

#include <map>
#include <random>
#include <thread>

#include <arpa/inet.h>
#include <sys/socket.h>
#include <unistd.h>

#include "optireduce/byte_order.hpp"
#include "optireduce/udp/address.hpp"
#include "optireduce/udp/udp_transport.hpp"
#include "udp_pair.hpp"

namespace optireduce::testing {
namespace {

struct Received {
  std::map<std::uint32_t, int> count;  // by message id
  std::size_t damaged = 0;
};

// Polls `t` until `want` distinct ids arrived or the deadline passed.
void collect(Transport& t, std::size_t want, Received& r, Clock::time_point deadline) {
  auto on_message = [&](const InboundMessage& m) {
    EXPECT_EQ(m.source, 0);
    EXPECT_TRUE(m.payload_held);
    if (m.header.size() != 8) {
      ++r.damaged;
      return;
    }
    const auto id = get_le<std::uint32_t>(m.header.data());
    const auto length = get_le<std::uint32_t>(m.header.data() + 4);
    std::vector<std::byte> copy(m.payload_size);
    if (length != m.payload_size || !m.copy_payload(copy) || copy != test_payload(id, length)) ++r.damaged;
    ++r.count[id];
  };
  while (r.count.size() < want && Clock::now() < deadline) (void)t.poll(deadline, on_message);
}

std::vector<std::size_t> payload_sizes(std::size_t max_message) {
  const std::size_t max_payload = max_message - 8;
  std::vector<std::size_t> sizes = {0, 1, 2, 3, 7, 8, 63, 64, 65, 1000, 1323, 1324, 1325, 4096, 8923, 8924};
  std::erase_if(sizes, [&](std::size_t s) { return s > max_payload; });
  for (std::size_t s : {max_payload / 2, max_payload - 1, max_payload}) sizes.push_back(s);
  return sizes;
}

class UdpExchange : public ::testing::TestWithParam<const char*> {};

TEST_P(UdpExchange, DeliversMessagesOfEverySizeOnBothLanesIntact) {
  UdpSettings settings;
  settings.iface = GetParam();
  if (settings.iface == "outward" && (settings.iface = outward_interface()).empty()) GTEST_SKIP() << "no outward interface";
  UdpPair pair = connect_udp_pair(settings);
  ASSERT_TRUE(pair.connected[0].ok()) << pair.connected[0].text();
  ASSERT_TRUE(pair.connected[1].ok()) << pair.connected[1].text();
  const std::size_t max_message = pair.rank[0]->traits().max_message_bytes;
  ASSERT_EQ(max_message, pair.rank[1]->traits().max_message_bytes);

  struct Message {
    std::vector<std::byte> header, payload;
    Lane lane;
  };
  std::vector<Message> messages;
  auto add = [&](std::size_t bytes, Lane lane) {
    const auto id = static_cast<std::uint32_t>(messages.size());
    messages.push_back({test_header(id, static_cast<std::uint32_t>(bytes)), test_payload(id, bytes), lane});
  };
  for (int round = 0; round < 3; ++round)
    for (std::size_t bytes : payload_sizes(max_message)) add(bytes, messages.size() % 5 == 4 ? Lane::control : Lane::data);
  // A run of equal messages, as the engine's chunks are: one GSO send carries many of them.
  for (int i = 0; i < 200; ++i) add(max_message - 8 - (i == 199 ? 100 : 0), Lane::data);
  std::atomic<bool> stop{false};
  const auto deadline = Clock::now() + std::chrono::seconds(20);
  std::thread sender([&] {
    for (const auto& m : messages) EXPECT_TRUE(pair.rank[0]->send(1, m.lane, m.header, m.payload).ok());
    keep_polling(*pair.rank[0], stop, deadline);
  });
  Received r;
  collect(*pair.rank[1], messages.size(), r, deadline);
  stop = true;
  sender.join();

  EXPECT_EQ(r.damaged, 0u);
  ASSERT_EQ(r.count.size(), messages.size());
  for (const auto& [id, n] : r.count) {
    if (messages[id].lane == Lane::data) EXPECT_EQ(n, 1) << id;
    else EXPECT_GE(n, 1) << id;  // control messages go twice: the second may still be on its way
  }
  EXPECT_EQ(pair.rank[0]->sends_in_flight(1), 0u);
  const TransportCounters c = pair.rank[1]->counters();
  EXPECT_EQ(c.rejected(), 0u);
  EXPECT_GT(c.receive_calls, 0u);
}

INSTANTIATE_TEST_SUITE_P(Paths, UdpExchange, ::testing::Values("", "outward"),
                         [](const auto& info) { return std::string(*info.param ? "Outward" : "Loopback"); });

TEST(UdpTransport, OverLoopbackUsesWholeDatagramsAndSaysSo) {
  UdpPair pair = connect_udp_pair({});
  ASSERT_TRUE(pair.connected[0].ok()) << pair.connected[0].text();
  ASSERT_TRUE(pair.connected[1].ok()) << pair.connected[1].text();
  const TransportTraits t = pair.rank[0]->traits();
  EXPECT_FALSE(t.reliable);
  EXPECT_FALSE(t.ordered);
  EXPECT_TRUE(t.can_abandon_sends);
  EXPECT_EQ(t.max_message_bytes, 65507u - datagram::Header::kSize);
  EXPECT_EQ(pair.rank[0]->describe(), "udp lo 65507B");
}

TEST(UdpTransport, OverAnOutwardInterfaceSegmentsToItsMtu) {
  UdpSettings settings;
  settings.iface = outward_interface();
  if (settings.iface.empty()) GTEST_SKIP() << "no outward interface";
  UdpPair pair = connect_udp_pair(settings);
  ASSERT_TRUE(pair.connected[0].ok()) << pair.connected[0].text();
  const std::string d = pair.rank[0]->describe();
  EXPECT_EQ(d.rfind("udp " + settings.iface + " gso ", 0), 0u) << d;
  EXPECT_LT(pair.rank[0]->traits().max_message_bytes, 9000u);
}

// Queued sends leave at the next poll() in one sendmmsg: on loopback one datagram per message,
// over an outward interface one GSO message for the whole run.
TEST_P(UdpExchange, AQueueOfEqualMessagesLeavesInOneSystemCall) {
  UdpSettings settings;
  settings.iface = GetParam();
  if (settings.iface == "outward" && (settings.iface = outward_interface()).empty()) GTEST_SKIP() << "no outward interface";
  UdpPair pair = connect_udp_pair(settings);
  ASSERT_TRUE(pair.connected[0].ok() && pair.connected[1].ok());
  const std::size_t payload_bytes = pair.rank[0]->traits().max_message_bytes - 8;
  const std::size_t count = settings.iface.empty() ? 7 : 40;  // below what is sent without waiting for poll()
  const auto header = test_header(3, static_cast<std::uint32_t>(payload_bytes));
  const auto payload = test_payload(3, payload_bytes);
  for (std::size_t i = 0; i < count; ++i) ASSERT_TRUE(pair.rank[0]->send(1, Lane::data, header, payload).ok());
  const TransportCounters before = pair.rank[0]->counters();
  EXPECT_EQ(pair.rank[0]->sends_in_flight(1), count);
  (void)pair.rank[0]->poll(Clock::now(), [](const InboundMessage&) {});
  const TransportCounters after = pair.rank[0]->counters();
  EXPECT_EQ(pair.rank[0]->sends_in_flight(1), 0u);
  EXPECT_EQ(after.send_calls - before.send_calls, 1u);
  EXPECT_GE(after.messages_sent - before.messages_sent, count);
}

// Over an outward interface the kernel hands a GRO socket a whole GSO run of this host's own in
// one buffer (nothing segments it on the way through lo): the receive path splits it, each
// datagram arrives intact, and the counters show fewer buffers than datagrams.
TEST(UdpTransport, ARunJoinedByTheKernelArrivesAsItsDatagrams) {
  UdpSettings settings;
  settings.iface = outward_interface();
  if (settings.iface.empty()) GTEST_SKIP() << "no outward interface";
  UdpPair pair = connect_udp_pair(settings);
  ASSERT_TRUE(pair.connected[0].ok() && pair.connected[1].ok());
  const std::size_t payload_bytes = pair.rank[0]->traits().max_message_bytes - 8;
  constexpr std::uint32_t kCount = 30;
  std::vector<std::vector<std::byte>> headers, payloads;  // a data send references them until it leaves
  for (std::uint32_t id = 0; id < kCount; ++id) {
    headers.push_back(test_header(id, static_cast<std::uint32_t>(payload_bytes)));
    payloads.push_back(test_payload(id, payload_bytes));
    ASSERT_TRUE(pair.rank[0]->send(1, Lane::data, headers.back(), payloads.back()).ok());
  }
  std::atomic<bool> stop{false};
  const auto deadline = Clock::now() + std::chrono::seconds(10);
  std::thread sender([&] { keep_polling(*pair.rank[0], stop, deadline); });
  Received r;
  collect(*pair.rank[1], kCount, r, deadline);
  stop = true;
  sender.join();
  EXPECT_EQ(r.damaged, 0u);
  ASSERT_EQ(r.count.size(), kCount);
  const TransportCounters c = pair.rank[1]->counters();
  EXPECT_EQ(c.rejected(), 0u);
  EXPECT_GE(c.messages_received, kCount);
  EXPECT_GT(c.receive_buffers, 0u);
  EXPECT_LT(c.receive_buffers, c.messages_received);
}

TEST(UdpTransport, AbandonDropsQueuedSendsSoNothingReferencesTheirBuffers) {
  UdpPair pair = connect_udp_pair({});
  ASSERT_TRUE(pair.connected[0].ok() && pair.connected[1].ok());
  const auto header = test_header(1, 100);
  const auto payload = test_payload(1, 100);
  // Small sends wait for poll() to leave in one batch: these ten are still queued.
  for (int i = 0; i < 10; ++i) ASSERT_TRUE(pair.rank[0]->send(1, Lane::data, header, payload).ok());
  EXPECT_EQ(pair.rank[0]->sends_in_flight(1), 10u);
  EXPECT_TRUE(pair.rank[0]->abandon_queued_sends());
  EXPECT_EQ(pair.rank[0]->sends_in_flight(1), 0u);
  EXPECT_EQ(pair.rank[0]->counters().abandoned_sends, 10u);
  std::atomic<bool> stop{false};
  const auto deadline = Clock::now() + std::chrono::milliseconds(200);
  std::thread sender([&] { keep_polling(*pair.rank[0], stop, deadline); });
  std::size_t got = 0;
  while (Clock::now() < deadline) (void)pair.rank[1]->poll(deadline, [&](const InboundMessage&) { ++got; });
  sender.join();
  EXPECT_EQ(got, 0u);
}

// A socket outside the job sprays random datagrams (some with the right magic and version) at
// rank 1's port before rank 0's messages: every one is rejected and counted, rank 0's arrive.
TEST(UdpTransport, AStrangerSprayingDatagramsIsRejectedWithoutEffect) {
  UdpPair pair = connect_udp_pair({});
  ASSERT_TRUE(pair.connected[0].ok() && pair.connected[1].ok());
  udp::Address a;
  ASSERT_TRUE(udp::decode(pair.rank[1]->local_address(), a).ok());
  sockaddr_in to{};
  to.sin_family = AF_INET;
  to.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  for (const auto& e : a.endpoints)
    if (e.loopback) to.sin_port = htons(e.port);
  const int stranger = ::socket(AF_INET, SOCK_DGRAM, 0);
  ASSERT_GE(stranger, 0);
  std::mt19937 rng(11);
  constexpr int kSprayed = 500;
  for (int i = 0; i < kSprayed; ++i) {
    std::vector<std::byte> d(rng() % 2000);
    for (auto& b : d) b = std::byte(static_cast<unsigned char>(rng()));
    if (d.size() >= 5 && i % 2) put_le<std::uint32_t>(d.data(), 0x4744524fu), d[4] = std::byte{2};
    ASSERT_EQ(::sendto(stranger, d.data(), d.size(), 0, reinterpret_cast<const sockaddr*>(&to), sizeof to),
              static_cast<ssize_t>(d.size()));
  }
  ::close(stranger);

  std::vector<std::vector<std::byte>> headers, payloads;
  for (std::uint32_t id = 0; id < 20; ++id) {
    headers.push_back(test_header(id, 3000));
    payloads.push_back(test_payload(id, 3000));
  }
  std::atomic<bool> stop{false};
  const auto deadline = Clock::now() + std::chrono::seconds(10);
  std::thread sender([&] {
    for (std::size_t i = 0; i < headers.size(); ++i) EXPECT_TRUE(pair.rank[0]->send(1, Lane::data, headers[i], payloads[i]).ok());
    keep_polling(*pair.rank[0], stop, deadline);
  });
  Received r;
  collect(*pair.rank[1], headers.size(), r, deadline);
  stop = true;
  sender.join();
  EXPECT_EQ(r.count.size(), headers.size());
  EXPECT_EQ(r.damaged, 0u);
  const TransportCounters c = pair.rank[1]->counters();
  EXPECT_EQ(c.rejected_unauthenticated, static_cast<std::uint64_t>(kSprayed));
  EXPECT_EQ(c.rejected_malformed + c.rejected_foreign_source, 0u);
}

// Every rank sends 8 MiB to every other at once, as fast as it can: the flow windows keep each
// receiver's socket buffer from overflowing, so over loopback nothing is lost.
TEST(UdpTransport, FourRanksAllToAllLoseNothingBehindTheirWindows) {
  constexpr int kRanks = 4;
  auto job = connect_udp_job(kRanks, {});
  ASSERT_EQ(job.size(), static_cast<std::size_t>(kRanks));
  const std::size_t message = job[0]->traits().max_message_bytes - 8;
  const std::vector<std::byte> data(8u << 20, std::byte{7});
  const std::size_t per_peer = (data.size() + message - 1) / message;
  std::vector<std::size_t> received(kRanks, 0);
  std::atomic<int> finished{0};
  const auto deadline = Clock::now() + std::chrono::seconds(30);
  auto run = [&](int r) {
    Transport& t = *job[static_cast<std::size_t>(r)];
    std::vector<std::size_t> sent(kRanks, 0);
    const auto header = test_header(static_cast<std::uint32_t>(r), 0);
    bool done = false;
    while (finished.load() < kRanks && Clock::now() < deadline) {
      for (int k = 1; k < kRanks; ++k) {
        const auto p = static_cast<std::size_t>((r + k) % kRanks);
        for (; sent[p] < per_peer && t.sends_in_flight(static_cast<int>(p)) < 256; ++sent[p]) {
          const std::size_t at = sent[p] * message;
          EXPECT_TRUE(t.send(static_cast<int>(p), Lane::data, header, std::span(data).subspan(at, std::min(message, data.size() - at))).ok());
        }
      }
      (void)t.poll(Clock::now() + std::chrono::milliseconds(1), [&](const InboundMessage&) { ++received[static_cast<std::size_t>(r)]; });
      if (!done && received[static_cast<std::size_t>(r)] >= (kRanks - 1) * per_peer) {
        done = true;
        ++finished;
      }
    }
  };
  std::vector<std::thread> threads;
  for (int r = 0; r < kRanks; ++r) threads.emplace_back(run, r);
  for (auto& t : threads) t.join();
  for (int r = 0; r < kRanks; ++r) {
    EXPECT_EQ(received[static_cast<std::size_t>(r)], (kRanks - 1) * per_peer) << r;
    EXPECT_EQ(job[static_cast<std::size_t>(r)]->counters().rejected(), 0u);
  }
}

TEST(UdpTransport, ConnectNamesTheRanksThatNeverAnswer) {
  Status s;
  auto silent = make_started<udp::UdpTransport>(UdpSettings{}, s);  // bound, never connected: it reads nothing
  ASSERT_TRUE(silent) << s.text();
  std::unique_ptr<Transport> t[2];
  for (auto& x : t) ASSERT_TRUE(x = make_started<udp::UdpTransport>(UdpSettings{}, s)) << s.text();
  const std::vector<std::vector<std::byte>> addresses = {t[0]->local_address(), t[1]->local_address(), silent->local_address()};
  const auto deadline = Clock::now() + std::chrono::seconds(1);
  Status result[2];
  std::thread other([&] { result[1] = t[1]->connect(1, addresses, deadline); });
  result[0] = t[0]->connect(0, addresses, deadline);
  other.join();
  for (const Status& r : result) {
    EXPECT_EQ(r.code(), StatusCode::timeout);
    EXPECT_NE(r.message().find("2 over"), std::string::npos) << r.message();  // the last of the silent ranks
  }
}

TEST(UdpTransport, RanksMustAgreeOnAuthentication) {
  Status s;
  UdpSettings off;
  off.authenticate = false;
  auto a = make_started<udp::UdpTransport>(UdpSettings{}, s);
  auto b = make_started<udp::UdpTransport>(off, s);
  ASSERT_TRUE(a && b);
  const Status r = a->connect(0, {a->local_address(), b->local_address()}, Clock::now() + std::chrono::seconds(1));
  EXPECT_EQ(r.code(), StatusCode::invalid);
  EXPECT_NE(r.message().find("OPTIREDUCE_AUTH"), std::string::npos) << r.message();
}

TEST(UdpTransport, WithoutAuthenticationMessagesStillArrive) {
  UdpSettings off;
  off.authenticate = false;
  UdpPair pair = connect_udp_pair(off);
  ASSERT_TRUE(pair.connected[0].ok() && pair.connected[1].ok());
  const auto header = test_header(5, 5000);
  const auto payload = test_payload(5, 5000);
  std::atomic<bool> stop{false};
  const auto deadline = Clock::now() + std::chrono::seconds(10);
  std::thread sender([&] {
    EXPECT_TRUE(pair.rank[0]->send(1, Lane::data, header, payload).ok());
    keep_polling(*pair.rank[0], stop, deadline);
  });
  Received r;
  collect(*pair.rank[1], 1, r, deadline);
  stop = true;
  sender.join();
  EXPECT_EQ(r.count[5], 1);
  EXPECT_EQ(r.damaged, 0u);
}

}  // namespace
}  // namespace optireduce::testing
