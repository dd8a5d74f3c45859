// Flow control and pacing: the window a receiver's granted buffer allows, when pings are due,
// what a pong confirms, and the token bucket's rate and burst.
#include <gtest/gtest.h>

#include "optireduce/datagram/flow_window.hpp"
#include "optireduce/datagram/token_bucket.hpp"

namespace optireduce::datagram {
namespace {

using C = FlowWindow::Clock;

TEST(ReceiveWindow, FollowsWhatTheKernelChargesPerDatagram) {
  EXPECT_EQ(kernel_charge(1472), 2304u);    // a 2 KiB buffer plus bookkeeping
  EXPECT_EQ(kernel_charge(8972), 16640u);   // a jumbo datagram rounds up to 16 KiB
  EXPECT_EQ(kernel_charge(65507), 69603u);  // page fragments: no rounding
  // 16 MiB granted, 64 KB datagrams, 4 ranks: 90 % of what fits in the three quarters the
  // kernel does not hold back, shared by 3 senders.
  const std::size_t w = receive_window_bytes(16u << 20, 65507, 4);
  EXPECT_EQ(w, static_cast<std::size_t>(0.9 * 0.75 * (16u << 20) * 65507.0 / 69603.0 / 3));
  // The Linux default buffer and many ranks: never below one datagram.
  EXPECT_EQ(receive_window_bytes(212992, 65507, 64), 65507u);
  EXPECT_LT(receive_window_bytes(212992, 1472, 4), receive_window_bytes(4u << 20, 1472, 4));
}

TEST(FlowWindow, OpensForOneDatagramWhenNothingIsUnconfirmed) {
  FlowWindow w(1000);
  EXPECT_TRUE(w.open(5000));
  w.sent(900);
  EXPECT_TRUE(w.open(100));
  EXPECT_FALSE(w.open(101));
  w.confirm(900);
  EXPECT_EQ(w.unconfirmed(), 0u);
  EXPECT_TRUE(w.open(5000));
}

TEST(FlowWindow, PingsEveryShareOfTheWindowAndWhenItCloses) {
  const auto t = C::now();
  FlowWindow w(1000);
  w.sent(300);
  EXPECT_EQ(w.ping_due(t, 100), std::nullopt);  // 30 % sent, the next fits
  w.sent(100);
  EXPECT_EQ(w.ping_due(t, 100), std::optional<std::uint64_t>(400));  // 40 %
  w.sent(100);
  EXPECT_EQ(w.ping_due(t, 100), std::nullopt);  // one is out, not yet due again
  EXPECT_EQ(w.ping_due(t + FlowWindow::kPingRetry, 100), std::optional<std::uint64_t>(500));  // lost? ask again
  w.confirm(500);
  EXPECT_EQ(w.ping_due(t + FlowWindow::kPingRetry, 100), std::nullopt);
  // A small window closed for a large datagram before the regular share: ping at once.
  FlowWindow small(1000);
  small.sent(10);
  EXPECT_EQ(small.ping_due(t, 995), std::optional<std::uint64_t>(10));
}

TEST(FlowWindow, IgnoresConfirmationsBeyondWhatWasSentAndTakesBackWithdrawnBytes) {
  FlowWindow w(1000);
  w.sent(600);
  w.confirm(700);  // forged or stale: beyond what was sent
  EXPECT_EQ(w.unconfirmed(), 600u);
  w.confirm(200);
  w.confirm(100);  // late and older: no step back
  EXPECT_EQ(w.unconfirmed(), 400u);
  const auto t = C::now();
  EXPECT_EQ(w.ping_due(t, 0), std::optional<std::uint64_t>(600));
  w.withdraw(300);  // did not leave after all; neither did the ping counting it
  EXPECT_EQ(w.unconfirmed(), 100u);
  w.sent(500);
  EXPECT_EQ(w.ping_due(t, 0), std::optional<std::uint64_t>(800));  // due at once, not after a retry
}

TEST(TokenBucket, PacesToItsRateAfterTheBurst) {
  TokenBucket b(1e6, 10000);  // 1 MB/s, 10 kB burst
  auto t = TokenBucket::Clock::now() + std::chrono::seconds(1);  // a full bucket
  int sent = 0;
  while (b.try_take(1000, t)) ++sent;
  EXPECT_EQ(sent, 10);
  EXPECT_FALSE(b.try_take(1000, t));
  const auto ready = b.ready_at(1000, t);
  EXPECT_NEAR(std::chrono::duration<double>(ready - t).count(), 1e-3, 1e-5);
  EXPECT_TRUE(b.try_take(1000, ready));
  b.refund(1000);
  EXPECT_TRUE(b.try_take(1000, ready));
  // Over 100 ms of steady demand it passes 100 kB (+ the burst), no more.
  std::size_t bytes = 0;
  for (auto now = ready; now < ready + std::chrono::milliseconds(100); now += std::chrono::microseconds(50))
    while (b.try_take(1000, now)) bytes += 1000;
  EXPECT_GE(bytes, 99000u);
  EXPECT_LE(bytes, 111000u);
}

TEST(TokenBucket, ARateOfZeroDoesNotPace) {
  TokenBucket b(0, 10);
  const auto t = TokenBucket::Clock::now();
  EXPECT_FALSE(b.paced());
  for (int i = 0; i < 100; ++i) EXPECT_TRUE(b.try_take(1e6, t));
  EXPECT_EQ(b.ready_at(1e9, t), t);
}

}  // namespace
}  // namespace optireduce::datagram
