// A flat bounded reduce-scatter over datagrams ends alike on every rank where the words that say a
// block is closed are lost (call/tar_call.cpp, TarCall::finish_reduce_scatter). A bounded call's
// word is its list (naming no chunk), exchanged as a bounded allreduce's lists are
// (call/list_exchange.cpp): a lost one is asked for again, and a rank leaves succeeded only once
// every peer's came. A calibration call's run over the datagrams (a probe) waits for its peers'
// words until its agreement window, then leaves: a peer whose words were all lost has closed its
// block by then. Neither may then fail the call itself because such a peer's word was missing
// while its own sends to that peer were still queued: that peer, its block closed without them,
// left the call succeeded.
//
// What is checked, and why it can fail: three ranks in-process, the exact path reliable and the
// bounded one with datagram traits; two calibration calls, then one bounded call in which rank 1's
// words to rank 0 are lost (the bounded call: its first lists) and rank 0's data to rank 1 waits
// in rank 0's queue (a sender whose queue does not drain; its words to rank 1 queue behind it):
// in the bounded call past rank 1's phase but not its hard deadline, in the calibration run past
// the hard deadline. Every rank's outcome must be the same, and every entry of every block a sum
// of some of the ranks' contributions that holds the owner's own (rank r contributes 2^r, so a
// sum names its ranks), the entries without a contribution counted as dropped. Before the fix
// rank 0 failed the call at its hard deadline (its queued sends to rank 1, no word from rank 1)
// while ranks 1 and 2 had left it succeeded: its failure agreement then waited for them for ever,
// which the test's hang guard ends (the test binary exits, failing). A third case: a rank whose
// part failed before the call (as a three-stage call's slice exchange enters it) gives up, its
// first notices to rank 0 lost; rank 0 must fail the call too. A fourth: such a rank enters the
// bounded call past its peers' hard deadline; they must not leave it succeeded without its word
// (before, they cut its data and left at their agreement windows while it failed the call).
#include <gtest/gtest.h>

#include <array>
#include <atomic>
#include <barrier>
#include <chrono>
#include <string>
#include <thread>

#include "optireduce/engine/engine/engine.hpp"
#include "optireduce/engine/tar/wire_header.hpp"
#include "hang_guard.hpp"
#include "inproc_transport.hpp"

namespace optireduce {
namespace {

constexpr int kRanks = 3;
constexpr std::uint64_t kBlock = 600;
constexpr unsigned kCalibration = 2;
constexpr auto kTimeout = std::chrono::milliseconds(1000);
constexpr auto kPastTimeout = std::chrono::milliseconds(3000);
constexpr auto kHangLimit = std::chrono::seconds(20);

struct RankResult {
  CallStats stats;
  std::vector<float> block;
};

// Whether a message is one of the bounded call's (armed once calibration is over on every rank).
struct Armed {
  std::atomic<bool> on{false};
  // The rank whose caller failed its part of the armed call (Engine::reduce_scatter with a
  // failure, as a three-stage call's slice exchange enters it): none where negative.
  int flagged = -1;
  // How long the flagged rank enters the armed call after the others.
  std::chrono::milliseconds late{0};
};

bool is_kind(std::span<const std::byte> header, MessageKind kind) {
  WireHeader h;
  return decode(header, h) && h.kind == kind;
}

// Every call of the job (kCalibration calibration calls, then one bounded call), each rank's
// outcome; the faults armed from call `arm_at` on.
std::vector<std::vector<RankResult>> run_calls(const testing::InProcNetwork& network, const std::shared_ptr<Armed>& armed,
                                               unsigned arm_at, const char* what) {
  EngineOptions options;
  options.timeout = kTimeout;
  options.calibration_calls = kCalibration;
  options.loss_budget = 1.0;  // a cut closes at the deadline, not held for what is late
  testing::InProcJob job = testing::start_inproc_job(kRanks, options, &network);
  std::vector<std::vector<RankResult>> results(kCalibration + 1, std::vector<RankResult>(kRanks));
  for (int r = 0; r < kRanks; ++r)
    if (!job.engines[static_cast<std::size_t>(r)]) {
      ADD_FAILURE() << "engine of rank " << r << " not created";
      return {};
    }
  const std::vector<std::uint64_t> blocks(kRanks, kBlock);
  std::barrier sync(kRanks, [&armed]() noexcept { armed->on = true; });
  std::vector<std::thread> threads;
  for (int r = 0; r < kRanks; ++r)
    threads.emplace_back([&, r] {
      Engine& engine = *job.engines[static_cast<std::size_t>(r)];
      const std::vector<float> input(kBlock * kRanks, static_cast<float>(1u << r));
      for (unsigned c = 0; c <= kCalibration; ++c) {
        if (c == arm_at) sync.arrive_and_wait();  // the last arrival arms the faults
        if (c == arm_at && r == armed->flagged) std::this_thread::sleep_for(armed->late);
        RankResult& mine = results[c][static_cast<std::size_t>(r)];
        mine.block.assign(kBlock, 0.0f);
        const Status part = c == arm_at && r == armed->flagged ? IoError("this rank's part failed before the call") : Status();
        mine.stats = engine.reduce_scatter(input.data(), mine.block.data(), blocks, ElementFormat::float32, true, part);
        if (!mine.stats.ok()) break;  // the communicator is broken: its later calls are not the engine's
      }
    });
  {
    testing::HangGuard guard(kHangLimit, std::string("the calls of case \"") + what + "\"");
    for (auto& t : threads) t.join();
  }
  return results;
}

// The same outcome of every call everywhere; where a call succeeded, every entry a sum of
// contributions that holds the owner's own, and no more entries short of the full sum than the
// rank counted dropped (none in a calibration call, which is exact).
void expect_agreed(const std::vector<std::vector<RankResult>>& calls) {
  const float full = static_cast<float>((1u << kRanks) - 1);
  for (std::size_t c = 0; c < calls.size(); ++c) {
    const auto& results = calls[c];
    const CallKind kind = c < kCalibration ? CallKind::calibration : CallKind::bounded;
    for (int r = 0; r < kRanks; ++r) {
      const RankResult& mine = results[static_cast<std::size_t>(r)];
      EXPECT_EQ(mine.stats.ok(), results[0].stats.ok())
          << "call " << c << ": rank " << r << " " << (mine.stats.ok() ? "succeeded" : "failed: " + mine.stats.status.text())
          << ", rank 0 " << (results[0].stats.ok() ? "succeeded" : "failed: " + results[0].stats.status.text());
      if (!mine.stats.ok()) continue;
      EXPECT_EQ(mine.stats.kind, kind) << "call " << c << ", rank " << r << ": not the kind of call the case needs";
      std::uint64_t short_of_full = 0, bad = 0;
      for (float v : mine.block) {
        const auto bits = static_cast<unsigned>(v);
        if (static_cast<float>(bits) != v || bits > (1u << kRanks) - 1 || !(bits & (1u << r))) ++bad;
        if (v != full) ++short_of_full;
      }
      EXPECT_EQ(bad, 0u) << "call " << c << ", rank " << r << ": entries that are no sum of contributions holding its own";
      EXPECT_LE(short_of_full, mine.stats.dropped_entries)
          << "call " << c << ", rank " << r << ": entries short of the full sum, not counted dropped";
    }
  }
}

// Rank 1's words that its block is closed (`word`: a bounded call's lists, a probe's "done"s) to
// rank 0 lost, the first `lost_copies` of them (all where negative), and rank 0's data to rank 1
// (and what queues behind it) held for `hold`, from call `arm_at` on.
testing::InProcNetwork lost_words_held_queue(const std::shared_ptr<Armed>& armed, MessageKind word, int lost_copies,
                                             Clock::duration hold) {
  testing::InProcNetwork network;  // datagram traits: neither reliable nor ordered
  network.drop_control = true;
  auto lost = std::make_shared<std::atomic<int>>(0);
  network.drop = [armed, word, lost_copies, lost](int from, int to, std::span<const std::byte> header) {
    return armed->on && from == 1 && to == 0 && is_kind(header, word) && (lost_copies < 0 || ++*lost <= lost_copies);
  };
  network.hold = [armed, hold](int from, int to, std::span<const std::byte>) {
    return armed->on && from == 0 && to == 1 ? hold : Clock::duration::zero();
  };
  return network;
}

TEST(DatagramReduceScatter, ARankWhosePeersWordsWereLostDoesNotFailWhereThePeerLeftSucceeded) {
  auto armed = std::make_shared<Armed>();
  // Rank 1's first two lists to rank 0 (its first copies) lost; rank 0's queue to rank 1 held
  // past rank 1's phase, within the hard deadline (a queue held past it is a direction down for
  // the whole call: rank 1 never hears rank 0's word, and the call fails on every rank).
  const auto calls = run_calls(lost_words_held_queue(armed, MessageKind::missing_list, 2, kTimeout / 2), armed, kCalibration,
                               "a bounded call");
  ASSERT_EQ(calls.size(), kCalibration + 1);
  expect_agreed(calls);
  ASSERT_TRUE(calls[kCalibration][0].stats.ok()) << calls[kCalibration][0].stats.status.text();
  // Rank 1's block was closed without rank 0's contributions: the case ran as meant.
  EXPECT_GT(calls[kCalibration][1].stats.dropped_entries, 0u) << "rank 1 got rank 0's data: the held queue did not hold";
}

// The same in a calibration call's run over the datagrams (its probe): a probe that failed fails
// the call on its rank, whose exact part every rank had completed.
TEST(DatagramReduceScatter, ACalibrationRunWhosePeersWordsWereLostDoesNotFailWhereThePeerLeftSucceeded) {
  auto armed = std::make_shared<Armed>();
  const auto calls = run_calls(lost_words_held_queue(armed, MessageKind::peer_done, -1, kPastTimeout), armed, 0, "a calibration call");
  ASSERT_EQ(calls.size(), kCalibration + 1);
  expect_agreed(calls);
}

// A rank whose part failed before the call tells its peers, who fail the call too: where every
// copy of its first notices to rank 0 is lost (and those rank 2 passes on), rank 0 must still
// hear of it. Before, rank 0 waited for rank 1's data until its hard deadline, closed its block
// without it, and left the call succeeded while ranks 1 and 2 failed it.
TEST(DatagramReduceScatter, ARankThatGaveUpBeforeTheCallIsHeardWhereItsFirstNoticesAreLost) {
  auto armed = std::make_shared<Armed>();
  armed->flagged = 1;
  auto lost = std::make_shared<std::array<std::atomic<int>, kRanks>>();
  testing::InProcNetwork network;
  network.drop_control = true;
  network.drop = [armed, lost](int from, int to, std::span<const std::byte> header) {
    // The first copies from each sender, as many as one notice sends at once.
    return armed->on && to == 0 && is_kind(header, MessageKind::call_failed) && ++(*lost)[static_cast<std::size_t>(from)] <= 4;
  };
  const auto calls = run_calls(network, armed, kCalibration, "a rank that gave up");
  ASSERT_EQ(calls.size(), kCalibration + 1);
  expect_agreed(calls);
  EXPECT_FALSE(calls[kCalibration][1].stats.ok()) << "rank 1 did not fail: the case did not run";
  EXPECT_GE((*lost)[1].load(), 4) << "rank 1's first notices were not all lost";
}

// A rank whose part failed before the call enters it past its peers' hard deadline: they wait for
// its word until then and fail the call, as it does. Before, they cut its data and left the call
// succeeded at their agreement windows while it failed it (the flat form of fault schedule seed
// 1001294's three-stage case: tests/unit/late_host_reduce_scatter_test.cpp).
TEST(DatagramReduceScatter, ARankThatGaveUpBeforeTheCallAndEntersPastTheDeadlineFailsItEverywhere) {
  auto armed = std::make_shared<Armed>();
  armed->flagged = 1;
  armed->late = kTimeout + kTimeout / 2;
  const auto calls = run_calls(testing::InProcNetwork{}, armed, kCalibration, "a rank that gave up late");
  ASSERT_EQ(calls.size(), kCalibration + 1);
  expect_agreed(calls);
  for (int r = 0; r < kRanks; ++r)
    EXPECT_FALSE(calls[kCalibration][static_cast<std::size_t>(r)].stats.ok()) << "rank " << r << " left the call succeeded";
}

}  // namespace
}  // namespace optireduce
