// The UCX transport on its own: two of them in one process (each its own worker on the shared
// context), connected over the host's transports, exchanging messages of every size class
// (eager and rendezvous), each named by the endpoint it came on.
#include <gtest/gtest.h>
#include <ucp/api/ucp.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <numeric>
#include <thread>

#include "optireduce/ucx/ucx_send_protocol.hpp"
#include "ucx_pair.hpp"

namespace optireduce {
namespace {

TEST(UcxTransport, MessagesOfEverySizeArriveWholeFromTheRightRank) {
  Pair p = connected_pair();
  ASSERT_EQ(p.t.size(), 2u);
  EXPECT_TRUE(p.t[0]->traits().reliable);
  EXPECT_TRUE(p.t[0]->traits().ordered);
  for (std::size_t bytes : {std::size_t{0}, std::size_t{1}, std::size_t{4096}, std::size_t{300000}, std::size_t{8u << 20}}) {
    std::vector<std::byte> header(56, std::byte{0x11});
    std::vector<std::byte> payload(bytes);
    for (std::size_t i = 0; i < bytes; ++i) payload[i] = static_cast<std::byte>(i * 31 + 7);
    ASSERT_TRUE(p.t[0]->send(1, Lane::data, header, payload).ok());
    bool got = false;
    const auto deadline = Clock::now() + std::chrono::seconds(30);
    while (!got && Clock::now() < deadline) {
      (void)p.t[0]->poll(Clock::time_point::min(), [](const InboundMessage&) {});  // drive the sender
      (void)p.t[1]->poll(Clock::now() + std::chrono::milliseconds(5), [&](const InboundMessage& m) {
        EXPECT_EQ(m.source, 0);
        EXPECT_EQ(m.payload_size, bytes);
        ASSERT_EQ(m.header.size(), header.size());
        std::vector<std::byte> into(m.payload_size);
        ASSERT_TRUE(m.copy_payload(into));
        EXPECT_EQ(into, payload) << bytes << " bytes";
        got = true;
      });
    }
    EXPECT_TRUE(got) << bytes << " bytes never arrived";
    while (p.t[0]->sends_in_flight(1) && Clock::now() < deadline)
      (void)p.t[0]->poll(Clock::now() + std::chrono::milliseconds(1), [](const InboundMessage&) {});
    EXPECT_EQ(p.t[0]->sends_in_flight(1), 0u);
  }
  const TransportCounters c = p.t[1]->counters();
  EXPECT_EQ(c.messages_received, 5u);
  EXPECT_EQ(c.rejected(), 0u);
}

TEST(UcxTransport, AStrangersEndpointIsNotARank) {
  Pair p = connected_pair();
  // A third worker that knows rank 1's address but is not part of the job: it connects on its
  // own and sends; rank 1 must not take it for anyone.
  Status status;
  auto stranger = ucx::make_transport({256u << 10}, status);
  ASSERT_TRUE(stranger) << status.text();
  const std::vector<std::vector<std::byte>> addresses{stranger->local_address(), p.t[1]->local_address()};
  (void)stranger->connect(0, addresses, Clock::now() + std::chrono::milliseconds(300));  // no hello comes back
  std::vector<std::byte> header(56, std::byte{0x22});
  (void)stranger->send(1, Lane::data, header, {});
  int delivered = 0;
  const auto until = Clock::now() + std::chrono::milliseconds(500);
  while (Clock::now() < until) {
    (void)stranger->poll(Clock::time_point::min(), [](const InboundMessage&) {});
    (void)p.t[1]->poll(Clock::now() + std::chrono::milliseconds(5), [&](const InboundMessage&) { ++delivered; });
  }
  EXPECT_EQ(delivered, 0);
  EXPECT_GE(p.t[1]->counters().rejected_unauthenticated, 1u);
}

// The engine waits for its sends to complete (a staging buffer to come free, a peer to be
// served) by calling poll() and looking at sends_in_flight() when it returns. A send that
// completes while nothing arrives must end the poll: when only arriving messages did, an exact
// call whose peers had already sent it everything slept until the watchdog (mpi.buckets.np3).
TEST(UcxTransport, PollReturnsWhenASendCompletesThoughNothingArrives) {
  Pair p = connected_pair();
  ASSERT_EQ(p.t.size(), 2u);
  // Larger than any shared-memory FIFO: UCX cannot finish it inside send().
  std::vector<std::byte> header(56, std::byte{0x33}), payload(8u << 20, std::byte{0x5a});
  ASSERT_TRUE(p.t[0]->send(1, Lane::data, header, payload).ok());
  if (p.t[0]->sends_in_flight(1) == 0) GTEST_SKIP() << "the send completed inside send(): nothing to wait for";
  // Rank 1 takes the message in and never answers.
  std::atomic<bool> stop{false};
  std::atomic<int> received{0};
  std::thread receiver([&] {
    while (!stop)
      (void)p.t[1]->poll(Clock::now() + std::chrono::milliseconds(2), [&](const InboundMessage& m) {
        std::vector<std::byte> into(m.payload_size);
        if (m.copy_payload(into)) ++received;
      });
  });
  const auto start = Clock::now();
  const auto deadline = start + std::chrono::seconds(20);
  int delivered = 0;
  Status st;
  // As TarCall::wait does: poll, then look again.
  while (p.t[0]->sends_in_flight(1) != 0 && Clock::now() < deadline)
    st = p.t[0]->poll(deadline, [&](const InboundMessage&) { ++delivered; });
  const auto waited = Clock::now() - start;
  stop = true;
  receiver.join();
  EXPECT_EQ(p.t[0]->sends_in_flight(1), 0u);
  EXPECT_EQ(delivered, 0);
  EXPECT_TRUE(st.ok()) << st.text();
  EXPECT_LT(waited, std::chrono::seconds(5)) << "poll() slept on although its send had completed";
  EXPECT_EQ(received.load(), 1);
}

// A rendezvous send completes when the receiver's acknowledgement (ATS) arrives, and the
// receiver's UCX sends it from its own progress. Once the engine has taken a fetched payload the
// receiver may end its call and stop progressing (its peers said done): the ATS must have left by
// then, even when it queues behind a full FIFO, or the sender waits in finish_sends until the
// receiver's next engine call.
TEST(UcxTransport, ARendezvousSendCompletesOnceTheReceiverTookItAndStopped) {
  ASSERT_EQ(setenv("OPTIREDUCE_UCX_RNDV_THRESH", "64K", 1), 0);  // 1 MiB by rendezvous, 512 B eagerly
  Pair p = connected_pair();
  unsetenv("OPTIREDUCE_UCX_RNDV_THRESH");
  ASSERT_EQ(p.t.size(), 2u);
  std::vector<std::byte> header(56, std::byte{0x44}), payload(1u << 20, std::byte{0x6b});
  ASSERT_TRUE(p.t[0]->send(1, Lane::data, header, payload).ok());
  ASSERT_EQ(p.t[0]->sends_in_flight(1), 1u);
  // Rank 1 fills rank 0's FIFO (rank 0 does not progress yet), so its ATS will queue.
  std::vector<std::byte> small(512, std::byte{0x01});
  for (int i = 0; i < 400; ++i) ASSERT_TRUE(p.t[1]->send(0, Lane::data, header, small).ok());
  // Rank 0 progresses from here on, in a thread of its own, until its send completes; only that
  // thread touches rank 0's transport (a transport is driven by one thread at a time).
  std::atomic<bool> stop{false}, sent{false};
  std::thread sender([&] {
    while (!stop && p.t[0]->sends_in_flight(1) != 0)
      (void)p.t[0]->poll(Clock::now() + std::chrono::milliseconds(2), [](const InboundMessage&) {});
    sent = p.t[0]->sends_in_flight(1) == 0;
  });
  // Rank 1 takes the payload in, then never progresses again. Its poll may last a second: the
  // acknowledgement is pushed out within the poll's deadline, and a loaded machine can take
  // longer than a few milliseconds to schedule rank 0's thread that drains the FIFO.
  bool fetched = false;
  const auto until = Clock::now() + std::chrono::seconds(10);
  while (!fetched && Clock::now() < until)
    (void)p.t[1]->poll(Clock::now() + std::chrono::seconds(1), [&](const InboundMessage& m) {
      if (m.payload_size != payload.size()) return;
      EXPECT_FALSE(m.payload_held) << "not a rendezvous payload";
      std::vector<std::byte> into(m.payload_size);
      fetched = m.copy_payload(into) && into == payload;
    });
  ASSERT_TRUE(fetched);
  const auto waited_from = Clock::now();
  while (!sent && Clock::now() - waited_from < std::chrono::seconds(5)) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  stop = true;
  sender.join();
  EXPECT_TRUE(sent) << "the receiver stopped with its acknowledgement still queued";
  // Rank 1's own small sends drain now that rank 0 progressed (they were rank 1's to drive).
  const auto drain = Clock::now() + std::chrono::seconds(10);
  while (p.t[1]->sends_in_flight(0) != 0 && Clock::now() < drain) {
    (void)p.t[1]->poll(Clock::time_point::min(), [](const InboundMessage&) {});
    (void)p.t[0]->poll(Clock::now() + std::chrono::milliseconds(1), [](const InboundMessage&) {});
  }
}

// Messages of one peer reach the handler in the order they were sent, whether UCX lends them
// only for its callback (delivered inside it) or keeps them (queued), and the handler may send
// from inside a delivery (the send waits until UCX's progress has returned). Over shared memory
// and over tcp.
TEST(UcxTransport, MessagesKeepTheirOrderAndTheHandlerMaySendWhileDelivering) {
  for (const char* tls : {"", "tcp"}) {
    Pair p = connected_pair_over(tls);
    ASSERT_EQ(p.t.size(), 2u);
    constexpr int kMessages = 40;
    const std::size_t sizes[] = {100, 300000, 4096, 2u << 20, 0};
    std::vector<std::vector<std::byte>> headers(kMessages), payloads(kMessages), replies(kMessages);
    for (int i = 0; i < kMessages; ++i) {
      headers[i].assign(56, std::byte{0});
      std::memcpy(headers[i].data(), &i, sizeof i);
      payloads[i].resize(sizes[i % 5]);
      for (std::size_t b = 0; b < payloads[i].size(); ++b) payloads[i][b] = static_cast<std::byte>(b * 13 + i);
      replies[i] = headers[i];
      ASSERT_TRUE(p.t[0]->send(1, Lane::data, headers[i], payloads[i]).ok());
    }
    int next = 0, replied = 0;
    const auto deadline = Clock::now() + std::chrono::seconds(30);
    while ((next < kMessages || replied < kMessages) && Clock::now() < deadline) {
      (void)p.t[0]->poll(Clock::now() + std::chrono::milliseconds(1), [&](const InboundMessage& m) {
        int index = -1;
        ASSERT_EQ(m.header.size(), 56u);
        std::memcpy(&index, m.header.data(), sizeof index);
        EXPECT_EQ(index, replied) << "replies out of order (" << tls << ")";
        EXPECT_EQ(m.source, 1);
        ++replied;
      });
      (void)p.t[1]->poll(Clock::now() + std::chrono::milliseconds(1), [&](const InboundMessage& m) {
        int index = -1;
        ASSERT_EQ(m.header.size(), 56u);
        std::memcpy(&index, m.header.data(), sizeof index);
        ASSERT_EQ(index, next) << "messages out of order (" << tls << ")";
        std::vector<std::byte> into(m.payload_size);
        ASSERT_TRUE(m.copy_payload(into));
        EXPECT_EQ(into, payloads[index]) << "message " << index << " (" << tls << ")";
        ++next;
        // Answered at once, from inside the delivery; the reply stays alive until it is sent.
        EXPECT_TRUE(p.t[1]->send(0, Lane::control, replies[index], {}).ok());
      });
    }
    EXPECT_EQ(next, kMessages) << tls;
    EXPECT_EQ(replied, kMessages) << tls;
    while ((p.t[0]->sends_in_flight(1) || p.t[1]->sends_in_flight(0)) && Clock::now() < deadline) {
      (void)p.t[0]->poll(Clock::now() + std::chrono::milliseconds(1), [](const InboundMessage&) {});
      (void)p.t[1]->poll(Clock::now() + std::chrono::milliseconds(1), [](const InboundMessage&) {});
    }
    EXPECT_EQ(p.t[0]->sends_in_flight(1), 0u);
    EXPECT_EQ(p.t[1]->sends_in_flight(0), 0u);
  }
}

}  // namespace
// Over shared memory with a single-copy transport a message of 64 KiB or more goes by rendezvous
// (the receiver fetches it into its destination: UCX holds no copy of it) and a smaller one
// eagerly; over tcp every message goes eagerly (a rendezvous there could wait for its sender until
// it timed out).
TEST(UcxTransport, OverSharedMemoryLargeMessagesGoByRendezvousAndOverTcpAllEagerly) {
  for (const char* tls : {"", "tcp"}) {
    Pair p = connected_pair_over(tls);
    ASSERT_EQ(p.t.size(), 2u);
    const std::string lanes = p.t[0]->describe();
    const bool single_copy = !*tls && (lanes.find("cma/") != std::string::npos || lanes.find("xpmem/") != std::string::npos ||
                                       lanes.find("knem/") != std::string::npos);
    if (!*tls && !single_copy) {
      std::printf("no single-copy transport between two workers here (%s): the shared-memory half is not run\n",
                  lanes.c_str());
      continue;
    }
    for (std::size_t bytes : {std::size_t{4096}, std::size_t{(64u << 10) - 1}, std::size_t{64u << 10}, std::size_t{1u << 20}}) {
      std::vector<std::byte> header(56, std::byte{0x22}), payload(bytes, std::byte{0x5a});
      ASSERT_TRUE(p.t[0]->send(1, Lane::data, header, payload).ok());
      bool got = false, held = false;
      const auto deadline = Clock::now() + std::chrono::seconds(30);
      while (!got && Clock::now() < deadline) {
        (void)p.t[0]->poll(Clock::time_point::min(), [](const InboundMessage&) {});
        (void)p.t[1]->poll(Clock::now() + std::chrono::milliseconds(5), [&](const InboundMessage& m) {
          held = m.payload_held;
          std::vector<std::byte> into(m.payload_size);
          ASSERT_TRUE(m.copy_payload(into));
          EXPECT_EQ(into, payload);
          got = true;
        });
      }
      ASSERT_TRUE(got) << bytes << " bytes never arrived over " << lanes;
      const bool rendezvous = single_copy && bytes >= (64u << 10);
      EXPECT_EQ(held, !rendezvous) << bytes << " bytes over " << lanes << (rendezvous ? ": not by rendezvous" : ": not eager");
      while (p.t[0]->sends_in_flight(1) && Clock::now() < deadline)
        (void)p.t[0]->poll(Clock::now() + std::chrono::milliseconds(1), [](const InboundMessage&) {});
    }
  }
}

// The protocol of a message from the lanes UCX chose, without a connection.
TEST(UcxSendProtocol, SharedMemoryWithASingleCopyTransportSendsLargeMessagesByRendezvous) {
  using ucx::SendProtocol;
  const std::size_t large = ucx::kSharedMemoryRendezvousBytes, small = large - 1;
  const SendProtocol shm = SendProtocol::choose("cma/memory.0,sysv/memory.0", false);
  EXPECT_EQ(shm.flag(large), unsigned{UCP_AM_SEND_FLAG_RNDV});
  EXPECT_EQ(shm.flag(small), unsigned{UCP_AM_SEND_FLAG_EAGER});
  // No single-copy transport: a rendezvous would cross the FIFO in fragments too.
  EXPECT_EQ(SendProtocol::choose("sysv/memory.0", false).flag(large), unsigned{UCP_AM_SEND_FLAG_EAGER});
  // A network lane, with or without the user's threshold: eager.
  EXPECT_EQ(SendProtocol::choose("cma/memory.0,tcp/lo", false).flag(large), unsigned{UCP_AM_SEND_FLAG_EAGER});
  EXPECT_EQ(SendProtocol::choose("tcp/eth0", true).flag(large), unsigned{UCP_AM_SEND_FLAG_EAGER});
  // The user's threshold over shared memory: UCX chooses.
  EXPECT_EQ(SendProtocol::choose("cma/memory.0,sysv/memory.0", true).flag(large), 0u);
  EXPECT_EQ(SendProtocol().flag(large), unsigned{UCP_AM_SEND_FLAG_EAGER});
}

}  // namespace optireduce
