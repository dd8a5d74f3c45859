// A flat reduce-scatter over a reliable transport that fails on some rank fails on every rank, and
// no rank hangs (call/tar_call.cpp, TarCall::finish_reduce_scatter). A rank's block depends only on
// what the others send to it: a rank whose block is complete (at once where it is empty) must not
// leave the call succeeded while a peer fails it, for that peer's failure agreement then waits for
// it (or, where the ranks leave together over the job's MPI, pairs with it and parts the outcomes).
//
// What is checked, and why it can fail: three ranks in-process over the reliable transport, one
// call each; every rank's outcome is the same, and the rank the failure starts on did fail (the
// path ran). A call that hangs ends the test binary (the hang guard), failing the test.
//  - rank 0 owns an empty block and rank 2 enters past the watchdog: rank 1 times out waiting for
//    rank 2's data, rank 2 fails on its notice, and rank 0 (which received nothing) must fail too;
//  - every block owned, rank 2's data to rank 1 held past the watchdog (a stalled sender): rank 0
//    gets its whole block, and must still fail with rank 1;
//  - ranks 0 and 1 own empty blocks and rank 2 enters past the watchdog: 0 and 1 said their blocks
//    are closed, then timed out waiting for rank 2's word and sent their notices. Rank 2 finds
//    its data, both words and both notices waiting: it must fail on the notices, not leave as
//    soon as it has its block and every word (a notice handled is a failure, whatever else came).
#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <thread>

#include "optireduce/engine/engine/engine.hpp"
#include "hang_guard.hpp"
#include "inproc_transport.hpp"

namespace optireduce {
namespace {

constexpr auto kWatchdog = std::chrono::milliseconds(400);
constexpr auto kPastWatchdog = std::chrono::milliseconds(1500);
constexpr auto kHangLimit = std::chrono::seconds(30);

struct FlatCase {
  std::vector<std::uint64_t> blocks;
  int late_rank = -1;      // enters kPastWatchdog late
  int held_from = -1;      // its data to held_to waits kPastWatchdog in its queue
  int held_to = -1;
};

std::vector<CallStats> run_flat_case(const FlatCase& c, const char* what) {
  const int ranks = static_cast<int>(c.blocks.size());
  auto fabric = std::make_shared<testing::InProcFabric>(ranks);
  testing::InProcNetwork network;
  network.traits = TransportTraits{true, true, true, std::size_t{1} << 30};  // reliable, as the default
  network.hold = [c](int from, int to, std::span<const std::byte>) {
    return from == c.held_from && to == c.held_to ? Clock::duration(kPastWatchdog) : Clock::duration::zero();
  };
  EngineOptions options;
  options.watchdog = kWatchdog;
  std::vector<CallStats> stats(static_cast<std::size_t>(ranks));
  std::vector<std::thread> threads;
  for (int r = 0; r < ranks; ++r)
    threads.emplace_back([&, r] {
      Status status;
      auto engine = Engine::create(r, ranks, std::make_unique<testing::InProcTransport>(fabric, r, network), nullptr,
                                   std::make_unique<testing::InProcBootstrap>(fabric, r), options, status);
      if (engine) {
        std::uint64_t total = 0;
        for (auto b : c.blocks) total += b;
        std::vector<float> input(total, static_cast<float>(r + 1)), output(c.blocks[static_cast<std::size_t>(r)] + 1, 0.0f);
        if (r == c.late_rank) std::this_thread::sleep_for(kPastWatchdog);
        stats[static_cast<std::size_t>(r)] = engine->reduce_scatter(input.data(), output.data(), c.blocks, ElementFormat::float32);
      } else {
        stats[static_cast<std::size_t>(r)].status = status;
      }
    });
  {
    testing::HangGuard guard(kHangLimit, std::string("the call of case \"") + what + "\"");
    for (auto& t : threads) t.join();
  }
  return stats;
}

void expect_one_outcome(const std::vector<CallStats>& stats, int failing_rank) {
  // The rank the failure starts on waited out its watchdog for data that came later.
  EXPECT_FALSE(stats[static_cast<std::size_t>(failing_rank)].ok()) << "rank " << failing_rank << " did not fail: the case did not run";
  for (std::size_t r = 0; r < stats.size(); ++r)
    EXPECT_EQ(stats[r].ok(), stats[static_cast<std::size_t>(failing_rank)].ok())
        << "rank " << r << " " << (stats[r].ok() ? "succeeded" : "failed: " + stats[r].status.text()) << ", rank "
        << failing_rank << " failed";
}

TEST(FlatReduceScatter, AnEmptyBlockFailsWhereALatePeerFailsTheCall) {
  FlatCase c;
  c.blocks = {0, 600, 600};
  c.late_rank = 2;
  expect_one_outcome(run_flat_case(c, "an empty block, a late peer"), 1);
}

TEST(FlatReduceScatter, ACompleteBlockFailsWhereAStalledSenderFailsAPeer) {
  FlatCase c;
  c.blocks = {600, 600, 600};
  c.held_from = 2, c.held_to = 1;
  expect_one_outcome(run_flat_case(c, "every block owned, a held link"), 1);
}

TEST(FlatReduceScatter, ALateRankFailsOnTheNoticesThatCameWithItsWholeBlock) {
  FlatCase c;
  c.blocks = {0, 0, 600};
  c.late_rank = 2;
  expect_one_outcome(run_flat_case(c, "two empty blocks, a late peer"), 0);
}

}  // namespace
}  // namespace optireduce
