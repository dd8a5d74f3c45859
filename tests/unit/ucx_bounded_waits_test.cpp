// The UCX transport's own waits end: a rendezvous fetch whose sender never answers is given up
// within its bounds, and the waits for what this rank queued to leave (a rendezvous
// acknowledgement, the sends flushed at close) sleep between looks instead of spinning (the peer
// may need this core to drain what they wait for).
#include <gtest/gtest.h>
#include <sys/resource.h>

#include <atomic>
#include <cstdlib>
#include <string>
#include <thread>

#include "optireduce/ucx/ucx_transport_impl.hpp"
#include "ucx_pair.hpp"

namespace optireduce {
namespace {

using namespace std::chrono_literals;

bool single_copy(const std::string& lanes) {
  return lanes.find("cma/") != std::string::npos || lanes.find("xpmem/") != std::string::npos ||
         lanes.find("knem/") != std::string::npos;
}

// Sleeps of the calling thread in the kernel so far (a spin that only yields adds none).
long voluntary_switches() {
  rusage usage{};
  getrusage(RUSAGE_THREAD, &usage);
  return usage.ru_nvcsw;
}

// With UCX's put scheme a rendezvous completes only once its sender writes the payload into the
// receiver's destination, which it does from its own progress. A sender that no longer
// progresses leaves the receiver's fetch waiting: it waits its bound, cancels (UCX 1.13 cancels
// tag receives only: nothing changes), waits a last bound and gives the transport up, so every
// poll() fails from then on. Before, the wait after the cancel had no bound: it waited for the
// sender for good.
TEST(UcxBoundedWaits, AFetchWhoseSenderNeverAnswersIsGivenUpWithinItsBounds) {
  ASSERT_EQ(setenv("OPTIREDUCE_UCX_RNDV_THRESH", "64K", 1), 0);
  Pair p = connected_pair_over("posix,self");
  unsetenv("OPTIREDUCE_UCX_RNDV_THRESH");
  ASSERT_EQ(p.t.size(), 2u);
  if (p.t[0]->describe().find("posix/") == std::string::npos) GTEST_SKIP() << "no posix shared memory here (" << p.t[0]->describe() << ")";
  auto* receiver = dynamic_cast<ucx::detail::UcxTransport*>(p.t[1].get());
  ASSERT_NE(receiver, nullptr);
  receiver->shorten_fetch_bounds(200ms, 200ms);
  // `into` outlives both transports: the sender writes it whenever it runs again.
  std::vector<std::byte> header(56, std::byte{0x55}), payload(1u << 20, std::byte{0x7c}), into(payload.size());
  ASSERT_TRUE(p.t[0]->send(1, Lane::data, header, payload).ok());
  // The announcement leaves; the receiver's request for the payload cannot have come yet.
  for (int i = 0; i < 10; ++i) (void)p.t[0]->poll(Clock::time_point::min(), [](const InboundMessage&) {});
  std::atomic<bool> finished{false};
  bool offered = false, copied = true;
  Status after;
  std::thread rank1([&] {
    const auto until = Clock::now() + 10s;
    while (!offered && Clock::now() < until)
      (void)p.t[1]->poll(Clock::now() + 5ms, [&](const InboundMessage& m) {
        if (m.payload_size != payload.size()) return;
        offered = true;
        EXPECT_FALSE(m.payload_held) << "not a rendezvous payload";
        copied = m.copy_payload(into);
      });
    after = p.t[1]->poll(Clock::now() + 5ms, [](const InboundMessage&) {});
    finished = true;
  });
  // The guard: a receiver still waiting by then waits for rank 0, which is then driven to
  // release it (the test fails).
  const auto guard = Clock::now() + 8s;
  while (!finished && Clock::now() < guard) std::this_thread::sleep_for(1ms);
  const bool gave_up_in_time = finished;
  while (!finished) (void)p.t[0]->poll(Clock::now() + 1ms, [](const InboundMessage&) {});
  rank1.join();
  EXPECT_TRUE(gave_up_in_time) << "the fetch waited for its sender past its bounds";
  EXPECT_TRUE(offered);
  EXPECT_FALSE(copied) << "the fetch completed: its sender was not needed";
  EXPECT_FALSE(after.ok());
  EXPECT_EQ(after.code(), StatusCode::peer) << after.text();
  // The sender first: its close progresses it, and it may write `into` then.
  p.t[0].reset();
  p.t[1].reset();
}

// A rendezvous acknowledgement queued behind a full FIFO leaves only once the peer drains it, and
// the receiver waits for it (push_out) until its poll's deadline. That wait sleeps on the worker's
// events between looks; it spun on UCX's progress before, holding a core the peer may need.
TEST(UcxBoundedWaits, WaitingForAnAcknowledgementToLeaveSleepsInsteadOfSpinning) {
  ASSERT_EQ(setenv("OPTIREDUCE_UCX_RNDV_THRESH", "64K", 1), 0);
  Pair p = connected_pair();
  unsetenv("OPTIREDUCE_UCX_RNDV_THRESH");
  ASSERT_EQ(p.t.size(), 2u);
  if (!single_copy(p.t[0]->describe())) GTEST_SKIP() << "no rendezvous between two workers here (" << p.t[0]->describe() << ")";
  std::vector<std::byte> header(56, std::byte{0x66}), payload(1u << 20, std::byte{0x2d}), into(payload.size());
  ASSERT_TRUE(p.t[0]->send(1, Lane::data, header, payload).ok());
  for (int i = 0; i < 10; ++i) (void)p.t[0]->poll(Clock::time_point::min(), [](const InboundMessage&) {});
  // Rank 1 fills rank 0's FIFO (rank 0 does not progress), so its acknowledgement queues.
  std::vector<std::byte> small(512, std::byte{0x01});
  for (int i = 0; i < 400; ++i) ASSERT_TRUE(p.t[1]->send(0, Lane::data, header, small).ok());
  bool fetched = false;
  long slept = 0;
  const auto until = Clock::now() + 10s;
  while (!fetched && Clock::now() < until) {
    const long before = voluntary_switches();
    (void)p.t[1]->poll(Clock::now() + 300ms, [&](const InboundMessage& m) {
      if (m.payload_size != payload.size()) return;
      fetched = m.copy_payload(into) && into == payload;
    });
    if (fetched) slept = voluntary_switches() - before;
  }
  ASSERT_TRUE(fetched);
  EXPECT_NE(p.t[1]->acknowledgements_pending(0), 0u) << "the acknowledgement left: nothing was waited for";
  // Blocks of at most 200 us over a wait of up to 300 ms: hundreds of sleeps; a spin has none.
  EXPECT_GE(slept, 10) << "the wait for the acknowledgement did not sleep";
  // Both drain once rank 0 progresses.
  const auto drain = Clock::now() + 10s;
  while ((p.t[0]->sends_in_flight(1) || p.t[1]->sends_in_flight(0) || p.t[1]->acknowledgements_pending(0)) && Clock::now() < drain) {
    (void)p.t[0]->poll(Clock::now() + 1ms, [](const InboundMessage&) {});
    (void)p.t[1]->poll(Clock::now() + 1ms, [](const InboundMessage&) {});
  }
  EXPECT_EQ(p.t[0]->sends_in_flight(1), 0u);
  EXPECT_EQ(p.t[1]->acknowledgements_pending(0), 0u);
}

// Closing flushes what this rank sent, for kCloseTimeout at most: sends to a peer that does not
// drain its FIFO wait out that bound. The wait sleeps on the worker's events between looks; it
// spun on UCX's progress before.
TEST(UcxBoundedWaits, ClosingWithSendsThePeerDoesNotTakeSleepsInsteadOfSpinning) {
  Pair p = connected_pair_over("tcp");
  ASSERT_EQ(p.t.size(), 2u);
  // More than the sockets' buffers hold: what is left stays in UCX's queue to rank 0.
  std::vector<std::byte> header(56, std::byte{0x77}), large(8u << 20, std::byte{0x03});
  for (int i = 0; i < 4; ++i) ASSERT_TRUE(p.t[1]->send(0, Lane::data, header, large).ok());
  for (int i = 0; i < 10; ++i) (void)p.t[1]->poll(Clock::time_point::min(), [](const InboundMessage&) {});
  if (p.t[1]->sends_in_flight(0) == 0) GTEST_SKIP() << "every send left at once (" << p.t[1]->describe() << "): nothing to wait for";
  const long before = voluntary_switches();
  p.t[1].reset();  // rank 0 never progresses meanwhile
  const long slept = voluntary_switches() - before;
  EXPECT_GE(slept, 10) << "closing waited for its sends without sleeping";
}

}  // namespace
}  // namespace optireduce
