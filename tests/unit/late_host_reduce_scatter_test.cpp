// A bounded three-stage reduce-scatter over datagrams whose one host fails its part at the watchdog
// (a local rank entered later than that) ends failed on every rank of every host
// (call/tar_call.cpp, TarCall::finish_reduce_scatter; docs/design.md, "One outcome per call").
//
// The case (fault schedule seed 1001294): hosts of 1 + 2 ranks; rank 1 enters the last call past
// the watchdog, so its host's reduce-scatter fails there and its holders enter their slices'
// exchanges flagged, after the other host's holder (rank 0) ran its bounded exchanges to their
// ends. A reduce-scatter ends in no fill agreement, and rank 0 used to leave its exchanges once its
// block was closed and its agreement window had passed, without a word from the holders it never
// heard from: it succeeded while ranks 1 and 2 failed (whose failure agreement then waited for it
// for ever, which the hang guard here ends: the test binary exits, failing). Now a bounded
// reduce-scatter over datagrams ends as an allreduce's lists do: a rank leaves succeeded only once
// every peer's word came, so rank 0 fails at its hard deadline and every rank takes that outcome.
//
// What is checked, and why it can fail: the calls before (one calibration call, two bounded ones)
// succeed on every rank with each rank's block the sum of the ranks' values (small integers, so
// exact), short of it only where counted dropped, and the bounded ones ran bounded; the late call
// fails on every rank.
#include <gtest/gtest.h>

#include <chrono>
#include <numeric>
#include <thread>

#include "hang_guard.hpp"
#include "tiers_job.hpp"

namespace optireduce {
namespace {

constexpr int kCalls = 4;
constexpr int kLateCall = kCalls - 1;
// How long the job may take before the hang guard ends the test binary (a rank's failure
// agreement that waits for a peer which left the call succeeded never returns).
constexpr auto kHangLimit = std::chrono::seconds(30);

TEST(LateHostReduceScatter, AHostThatFailsItsPartAtTheWatchdogFailsTheCallOnEveryHost) {
  testing::InProcNetwork clean;  // datagram traits, nothing lost
  testing::TiersJob job;
  job.counts = {1, 2};
  job.calls = kCalls;
  job.network = &clean;
  job.bounded = true;
  job.options.calibration_calls = 1;
  job.options.timeout = std::chrono::milliseconds(300);
  job.options.watchdog = std::chrono::milliseconds(600);
  job.options.loss_budget = 1.0;  // a holder that never came is cut at the deadline, not waited for
  const std::vector<std::uint64_t> blocks{320, 320, 340};
  job.blocks_of = [&](int) { return blocks; };
  job.before_call = [](int rank, int call, const Engine&) {
    if (rank == 1 && call == kLateCall) std::this_thread::sleep_for(std::chrono::milliseconds(900));
  };
  testing::TiersOutcome out;
  {
    testing::HangGuard guard(kHangLimit, "the job");
    out = testing::run_tiers_job(job);
  }
  ASSERT_TRUE(out.all_tiered);
  const int ranks = 3;
  for (int c = 0; c < kLateCall; ++c) {
    const std::vector<float> sum = testing::tiers_exact_sum(ranks, c, std::accumulate(blocks.begin(), blocks.end(), std::uint64_t{0}));
    std::uint64_t begin = 0;
    for (int r = 0; r < ranks; ++r) {
      const auto at = static_cast<std::size_t>(c * ranks + r);
      const CallStats& stats = out.stats[at];
      const std::uint64_t size = blocks[static_cast<std::size_t>(r)];
      ASSERT_TRUE(stats.ok()) << "call " << c << ", rank " << r << ": " << stats.status.text();
      EXPECT_TRUE(stats.stages.hierarchical) << "call " << c << ", rank " << r;
      EXPECT_EQ(stats.kind, c == 0 ? CallKind::calibration : CallKind::bounded) << "call " << c << ", rank " << r;
      ASSERT_EQ(out.results[at].size(), size);
      std::uint64_t off = 0;
      for (std::uint64_t i = 0; i < size; ++i) off += out.results[at][i] != sum[begin + i];
      EXPECT_LE(off, stats.dropped_entries) << "call " << c << ", rank " << r << ": entries off the exact sum, not counted dropped";
      if (c == 0) {
        EXPECT_EQ(off, 0u) << "call " << c << ", rank " << r << ": a calibration call is exact";
      }
      begin += size;
    }
  }
  for (int r = 0; r < ranks; ++r) {
    const CallStats& stats = out.stats[static_cast<std::size_t>(kLateCall * ranks + r)];
    EXPECT_FALSE(stats.ok()) << "rank " << r << " left the late call succeeded while another host failed it";
  }
}

}  // namespace
}  // namespace optireduce
