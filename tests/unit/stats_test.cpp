#include <gtest/gtest.h>

#include "optireduce/engine/report/stats.hpp"

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
  s.record_passthrough(PassReason::datatype, 7);
  auto snap = s.snapshot();
  EXPECT_EQ(snap.intercepted_calls, 2u);
  EXPECT_EQ(snap.passthrough_calls, 1u);
  EXPECT_EQ(snap.bytes_reduced, 800u);
  EXPECT_DOUBLE_EQ(snap.dropped_fraction(), 5.0 / 200.0);
  EXPECT_EQ(snap.latency_us.max, 30);
  EXPECT_DOUBLE_EQ(snap.engine_time_us, 40);
  EXPECT_DOUBLE_EQ(snap.passthrough_time_us, 7);
  s.reset();
}

TEST(Stats, PassthroughByReason) {
  ProcessStats& s = ProcessStats::instance();
  s.reset();
  s.record_passthrough(PassReason::nonblocking);
  s.record_passthrough(PassReason::datatype);
  s.record_passthrough(PassReason::nonblocking);
  s.record_passthrough(PassReason::device_buffer);
  const auto snap = s.snapshot();
  EXPECT_EQ(snap.passthrough_calls, 4u);
  EXPECT_EQ(snap.passthrough_by_reason[static_cast<std::size_t>(PassReason::nonblocking)], 2u);
  EXPECT_EQ(snap.passthrough_by_reason[static_cast<std::size_t>(PassReason::datatype)], 1u);
  EXPECT_EQ(snap.passthrough_by_reason[static_cast<std::size_t>(PassReason::device_buffer)], 1u);
  EXPECT_EQ(snap.passthrough_by_reason[static_cast<std::size_t>(PassReason::op)], 0u);
  EXPECT_STREQ(to_string(PassReason::size), "below_min_bytes");
  s.reset();
}

TEST(Stats, ByOperationAndFormat) {
  ProcessStats& s = ProcessStats::instance();
  s.reset();
  const CallShape scatter16{Collective::reduce_scatter, ElementFormat::float16};
  s.record_intercepted({400, 100, 0, 10});
  s.record_intercepted({200, 50, 0, 10, false, false, 0, false, false, scatter16});
  s.record_intercepted({200, 50, 0, 10, false, false, 0, false, false, scatter16});
  s.record_passthrough(PassReason::op, 1, Collective::reduce_scatter);
  s.record_passthrough(PassReason::op, 1);
  const auto snap = s.snapshot();
  EXPECT_EQ(snap.intercepted_calls, 3u);
  EXPECT_EQ(snap.intercepted_by_shape[CallShape{}.index()], 1u);
  EXPECT_EQ(snap.intercepted_by_shape[scatter16.index()], 2u);
  EXPECT_EQ(snap.passthrough_by_collective[static_cast<std::size_t>(Collective::allreduce)], 1u);
  EXPECT_EQ(snap.passthrough_by_collective[static_cast<std::size_t>(Collective::reduce_scatter)], 1u);
  s.reset();
}

TEST(Stats, PercentilesPerSizeClassAndCutCalls) {
  ProcessStats& s = ProcessStats::instance();
  s.reset();
  // 1 MiB class: 100 calls of 1..100 us, every tenth cut; 4 MiB + 4 bytes (still the 4 MiB class): 3 calls.
  for (int i = 1; i <= 100; ++i) s.record_intercepted({1u << 20, 1, 0, double(i), true, false, 50, i % 10 == 0});
  for (int i = 0; i < 3; ++i) s.record_intercepted({(4u << 20) + 4, 1, 0, 1000.0 + i});
  const auto snap = s.snapshot();
  ASSERT_EQ(snap.size_classes.size(), 2u);
  EXPECT_EQ(snap.size_classes[0].size_class, 20u);
  EXPECT_EQ(snap.size_classes[0].calls, 100u);
  EXPECT_EQ(snap.size_classes[0].cut_calls, 10u);
  EXPECT_EQ(snap.size_classes[0].latency_us.p50, 50);
  EXPECT_EQ(snap.size_classes[0].latency_us.p99, 99);
  EXPECT_EQ(snap.size_classes[1].size_class, 22u);
  EXPECT_EQ(snap.size_classes[1].calls, 3u);
  EXPECT_EQ(snap.size_classes[1].latency_us.max, 1002);
  EXPECT_EQ(snap.cut_calls, 10u);
  EXPECT_EQ(snap.bounded_calls, 100u);
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
