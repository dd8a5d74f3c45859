// Two ofi transports of one process over libfabric's udp provider on loopback: connection,
// messages of many sizes on both lanes (with and without FEC), abandoned sends.
#include <gtest/gtest.h>

#include <map>
#include <thread>

#include "optireduce/byte_order.hpp"
#include "optireduce/ofi/ofi_transport.hpp"
#include "udp_pair.hpp"

namespace optireduce::testing {
namespace {

struct OfiPair {
  std::unique_ptr<Transport> rank[2];
  Status connected[2];
};

OfiPair connect_ofi_pair(const OfiSettings& settings) {
  OfiPair pair;
  for (int r = 0; r < 2; ++r)
    if (!(pair.rank[r] = make_started<ofi::OfiTransport>(settings, pair.connected[r]))) return pair;
  const std::vector<std::vector<std::byte>> addresses = {pair.rank[0]->local_address(), pair.rank[1]->local_address()};
  const auto deadline = Clock::now() + std::chrono::seconds(10);
  std::thread other([&] { pair.connected[1] = pair.rank[1]->connect(1, addresses, deadline); });
  pair.connected[0] = pair.rank[0]->connect(0, addresses, deadline);
  other.join();
  return pair;
}

class OfiExchange : public ::testing::TestWithParam<unsigned> {};

TEST_P(OfiExchange, DeliversMessagesOfManySizesOnBothLanesIntact) {
  OfiSettings settings;
  settings.provider = "udp";
  settings.fec_group = GetParam();
  OfiPair pair = connect_ofi_pair(settings);
  if (!pair.rank[0] && pair.connected[0].code() == StatusCode::unavailable) GTEST_SKIP() << pair.connected[0].text();
  ASSERT_TRUE(pair.connected[0].ok()) << pair.connected[0].text();
  ASSERT_TRUE(pair.connected[1].ok()) << pair.connected[1].text();
  const TransportTraits traits = pair.rank[0]->traits();
  EXPECT_FALSE(traits.reliable);
  const std::size_t max_payload = traits.max_message_bytes - 8;
  std::vector<std::vector<std::byte>> headers, payloads;
  std::vector<Lane> lanes;
  for (std::size_t bytes : {std::size_t{0}, std::size_t{1}, std::size_t{100}, max_payload / 2, max_payload - 1, max_payload}) {
    for (int copy = 0; copy < 4; ++copy) {
      const auto id = static_cast<std::uint32_t>(headers.size());
      headers.push_back(test_header(id, static_cast<std::uint32_t>(bytes)));
      payloads.push_back(test_payload(id, bytes));
      lanes.push_back(copy == 3 ? Lane::control : Lane::data);
    }
  }
  std::atomic<bool> stop{false};
  const auto deadline = Clock::now() + std::chrono::seconds(20);
  std::thread sender([&] {
    for (std::size_t i = 0; i < headers.size(); ++i) EXPECT_TRUE(pair.rank[0]->send(1, lanes[i], headers[i], payloads[i]).ok());
    keep_polling(*pair.rank[0], stop, deadline);
  });
  std::map<std::uint32_t, int> count;
  std::size_t damaged = 0;
  auto on_message = [&](const InboundMessage& m) {
    EXPECT_EQ(m.source, 0);
    const auto id = get_le<std::uint32_t>(m.header.data());
    std::vector<std::byte> copy(m.payload_size);
    if (m.header.size() != 8 || !m.copy_payload(copy) || copy != test_payload(id, get_le<std::uint32_t>(m.header.data() + 4)))
      ++damaged;
    ++count[id];
  };
  while (count.size() < headers.size() && Clock::now() < deadline) (void)pair.rank[1]->poll(deadline, on_message);
  stop = true;
  sender.join();
  EXPECT_EQ(damaged, 0u);
  EXPECT_EQ(count.size(), headers.size());
  EXPECT_EQ(pair.rank[1]->counters().rejected(), 0u);
  if (settings.fec_group) {
    EXPECT_GT(pair.rank[0]->counters().fec_parity_sent, 0u);
  }
}

INSTANTIATE_TEST_SUITE_P(Fec, OfiExchange, ::testing::Values(0u, 4u),
                         [](const auto& info) { return info.param ? "Group" + std::to_string(info.param) : std::string("Off"); });

TEST(OfiTransport, AbandonReleasesTheQueuedSends) {
  OfiSettings settings;
  settings.provider = "udp";
  settings.rate_bits_per_s = 8000;  // 1 kB/s: the sends stay queued behind the bucket
  OfiPair pair = connect_ofi_pair(settings);
  if (!pair.rank[0] && pair.connected[0].code() == StatusCode::unavailable) GTEST_SKIP() << pair.connected[0].text();
  ASSERT_TRUE(pair.connected[0].ok() && pair.connected[1].ok());
  const auto header = test_header(1, 1000);
  const auto payload = test_payload(1, 1000);
  for (int i = 0; i < 200; ++i) ASSERT_TRUE(pair.rank[0]->send(1, Lane::data, header, payload).ok());
  EXPECT_GT(pair.rank[0]->sends_in_flight(1), 100u);
  EXPECT_TRUE(pair.rank[0]->abandon_queued_sends());
  EXPECT_EQ(pair.rank[0]->sends_in_flight(1), 0u);
  EXPECT_GT(pair.rank[0]->counters().abandoned_sends, 100u);
}

}  // namespace
}  // namespace optireduce::testing
