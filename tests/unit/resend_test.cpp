// The resend requests' wire form and the bounds both sides keep.
#include <gtest/gtest.h>

#include <array>

#include "optireduce/byte_order.hpp"
#include "optireduce/engine/tar/resend.hpp"

namespace optireduce {
namespace {

InboundMessage message_of(std::span<const std::byte> payload) {
  InboundMessage m;
  m.payload = payload;
  m.payload_size = payload.size();
  return m;
}

TEST(Resends, AListRoundTripsAndEveryIndexIsChecked) {
  Resends asker, server;
  asker.begin(4, 2);
  server.begin(4, 2);
  const std::array<std::uint32_t, 3> chunks{0, 7, 3};
  const auto bytes = asker.encode(chunks);
  const std::vector<std::byte> payload(bytes.begin(), bytes.end());
  ASSERT_TRUE(server.decode(message_of(payload), 3, 8));
  EXPECT_EQ(std::vector<std::uint32_t>(server.decoded().begin(), server.decoded().end()),
            std::vector<std::uint32_t>(chunks.begin(), chunks.end()));
  EXPECT_FALSE(server.decode(message_of(payload), 3, 7)) << "chunk 7 of a shard of 7";
  EXPECT_TRUE(server.decoded().empty());
  EXPECT_FALSE(server.decode(message_of(payload), 4, 8)) << "length and payload disagree";
  EXPECT_FALSE(server.decode(message_of(payload), 3, 2)) << "more chunks than the shard has";
  std::vector<std::byte> huge(4, std::byte{0xff});
  EXPECT_FALSE(server.decode(message_of(huge), 1, 8)) << "index 2^32-1";
}

TEST(Resends, EachRoundOfEachPeerAndPhaseIsServedOnce) {
  Resends server;
  server.begin(3, 2);
  EXPECT_TRUE(server.take(1, 0, 0));
  EXPECT_FALSE(server.take(1, 0, 0)) << "the second copy of a request";
  EXPECT_TRUE(server.take(1, 1, 0)) << "another phase";
  EXPECT_TRUE(server.take(2, 0, 0)) << "another peer";
  EXPECT_TRUE(server.take(1, 0, 1));
  EXPECT_FALSE(server.take(1, 0, 2)) << "beyond the rounds";
  EXPECT_FALSE(server.take(3, 0, 0)) << "no such rank";
  server.begin(3, 2);
  EXPECT_TRUE(server.take(1, 0, 0)) << "a new call";
  Resends off;
  off.begin(3, 0);
  EXPECT_FALSE(off.take(1, 0, 0));
}

TEST(Resends, EachRoundWaitsForTheOneBeforeAndNoneIsPastTheDeadline) {
  using std::chrono::milliseconds;
  Resends r;
  r.begin(2, 2);
  const auto t0 = Clock::now();
  const auto deadline = t0 + milliseconds(10);
  const Clock::duration wait = milliseconds(3);
  EXPECT_TRUE(r.due(0, t0, deadline, wait)) << "the first round at once";
  EXPECT_FALSE(r.due(0, deadline, deadline, wait)) << "never at or past the deadline";
  r.note_asked(0, t0);
  EXPECT_FALSE(r.all_asked(0));
  EXPECT_EQ(r.next_due(0, wait), t0 + wait);
  EXPECT_FALSE(r.due(0, t0 + milliseconds(2), deadline, wait));
  EXPECT_TRUE(r.due(0, t0 + milliseconds(3), deadline, wait));
  EXPECT_TRUE(r.due(1, t0, deadline, wait)) << "phases count apart";
  r.note_asked(0, t0 + milliseconds(4));
  EXPECT_TRUE(r.all_asked(0));
  EXPECT_EQ(r.next_due(0, wait), Clock::time_point::max());
  EXPECT_EQ(r.gives_up_at(0, wait), t0 + milliseconds(7));
  EXPECT_EQ(r.asked(0), 2u);
  r.begin(2, 0);
  EXPECT_TRUE(r.all_asked(0)) << "no rounds: nothing to ask";
  EXPECT_EQ(r.next_due(0, wait), Clock::time_point::max());
}

}  // namespace
}  // namespace optireduce
