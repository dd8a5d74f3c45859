#include <gtest/gtest.h>

#include "optireduce/engine/stats.hpp"

namespace optireduce {
namespace {

TEST(Stats, NearestRankPercentiles) {
  std::vector<double> v;
  for (int i = 1; i <= 100; ++i) v.push_back(101 - i);
  EXPECT_EQ(percentile(v, 0.50), 50);
  EXPECT_EQ(percentile(v, 0.99), 99);
  EXPECT_EQ(percentile(v, 1.0), 100);
  EXPECT_EQ(percentile({}, 0.5), 0);
  EXPECT_EQ(percentile({7}, 0.99), 7);
}

TEST(Stats, CountsAndDroppedFraction) {
  ProcessStats& s = ProcessStats::instance();
  s.reset();
  s.record_intercepted({400, 100, 0, 10});
  s.record_intercepted({400, 100, 5, 30});
  s.record_passthrough();
  auto snap = s.snapshot();
  EXPECT_EQ(snap.intercepted_calls, 2u);
  EXPECT_EQ(snap.passthrough_calls, 1u);
  EXPECT_EQ(snap.bytes_reduced, 800u);
  EXPECT_DOUBLE_EQ(snap.dropped_fraction(), 5.0 / 200.0);
  EXPECT_EQ(snap.latency_us.max, 30);
  s.reset();
}

TEST(Stats, LatencyMemoryStaysFlatOverLongRuns) {
  ProcessStats& s = ProcessStats::instance();
  s.reset();
  for (int i = 0; i < 200000; ++i) s.record_intercepted({4, 1, 0, i < 100000 ? 10.0 : 20.0});
  auto snap = s.snapshot();
  EXPECT_EQ(snap.intercepted_calls, 200000u);
  EXPECT_EQ(snap.latency_us.max, 20);
  // Half the calls took 20 us: a fair sample puts p99 there and p50 at either value.
  EXPECT_EQ(snap.latency_us.p99, 20);
  s.reset();
}

}  // namespace
}  // namespace optireduce
