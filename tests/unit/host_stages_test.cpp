// The exact stages inside a host (hierarchy/host_segment, hierarchy/host_stages): local ranks as
// threads, each with its own mapping of the engine's POSIX shared memory, as separate processes
// would have.
#include <gtest/gtest.h>

#include <sys/mman.h>
#include <fcntl.h>
#include <unistd.h>

#include <memory>
#include <random>
#include <thread>
#include <vector>

#include "optireduce/engine/hierarchy/host_stages.hpp"

namespace optireduce {
namespace {

std::uint64_t unique_id() { return (static_cast<std::uint64_t>(getpid()) << 32) ^ std::random_device{}(); }

bool name_exists(const std::string& name) {
  const int fd = shm_open(name.c_str(), O_RDONLY, 0);
  if (fd >= 0) close(fd);
  return fd >= 0;
}

TEST(HostStages, ReduceScatterThenAllGatherGiveTheHostsSumOnEveryRank) {
  constexpr int kLocal = 3;
  constexpr int kCalls = 5;
  const std::uint64_t id = unique_id();
  const std::size_t most = 10007;
  std::vector<std::vector<std::vector<float>>> outputs(kLocal, std::vector<std::vector<float>>(kCalls));
  std::vector<Status> failures(kLocal);
  auto input_of = [](int local, int call, std::size_t i) { return static_cast<float>((local + 1) * 0.37 + call * 1.1 + i * 1e-3); };
  auto run = [&](int local) {
    Status st;
    auto seg = HostSegment::attach(id, "hostA", local, kLocal, most * sizeof(float), Clock::now() + std::chrono::seconds(60), st);
    if (!seg) {
      failures[local] = st;
      return;
    }
    HostStages stages(*seg, local);
    for (int call = 0; call < kCalls; ++call) {
      const std::size_t n = most - static_cast<std::size_t>(call) * 1000;  // lengths change between calls
      std::vector<float> in(n), reduced;
      for (std::size_t i = 0; i < n; ++i) in[i] = input_of(local, call, i);
      const ElementRange mine = local_range(local, kLocal, n, 16);
      reduced.resize(mine.size());
      auto& out = outputs[local][call];
      out.assign(n, -1.0f);
      const auto deadline = Clock::now() + std::chrono::seconds(60);
      // Every other call sums straight into this rank's range of the result area (HostTiers' way).
      float* sum = call % 2 ? reduced.data() : static_cast<float*>(stages.result_range(mine));
      if (Status s = stages.reduce_scatter(in.data(), n, mine, sum, deadline); !s.ok()) failures[local] = s;
      else if (Status g = stages.all_gather(sum, mine, out.data(), n, deadline); !g.ok()) failures[local] = g;
      if (!failures[local].ok()) return;
    }
    EXPECT_GT(stages.shared_memory_bytes(), 0u);
  };
  std::vector<std::thread> threads;
  for (int l = 0; l < kLocal; ++l) threads.emplace_back(run, l);
  for (auto& t : threads) t.join();
  for (int l = 0; l < kLocal; ++l) ASSERT_TRUE(failures[l].ok()) << failures[l].text();
  // Nothing left in /dev/shm once every rank attached.
  EXPECT_FALSE(name_exists(HostSegment::name_of(id, "hostA")));
  for (int call = 0; call < kCalls; ++call) {
    const std::size_t n = outputs[0][call].size();
    for (std::size_t i = 0; i < n; ++i) {
      float expected = input_of(0, call, i);  // the sum in local-rank order
      for (int l = 1; l < kLocal; ++l) expected += input_of(l, call, i);
      ASSERT_EQ(outputs[0][call][i], expected) << "call " << call << " element " << i;
    }
    for (int l = 1; l < kLocal; ++l) EXPECT_EQ(0, std::memcmp(outputs[l][call].data(), outputs[0][call].data(), n * sizeof(float)));
  }
}

TEST(HostStages, AttachIsBoundedAndLeavesNothingBehind) {
  const std::uint64_t id = unique_id();
  Status st;
  // A rank whose host's first rank never comes: a timeout, not a hang.
  auto lonely = HostSegment::attach(id, "hostB", 1, 2, 4096, Clock::now() + std::chrono::milliseconds(50), st);
  EXPECT_EQ(lonely, nullptr);
  EXPECT_EQ(st.code(), StatusCode::timeout) << st.text();
  {
    // A first rank whose peer never attaches removes the name when it goes.
    auto first = HostSegment::attach(id, "hostB", 0, 2, 4096, Clock::now() + std::chrono::seconds(5), st);
    ASSERT_NE(first, nullptr) << st.text();
    EXPECT_TRUE(name_exists(HostSegment::name_of(id, "hostB")));
    // A second creator of the same name is refused, never joined.
    Status again;
    EXPECT_EQ(HostSegment::attach(id, "hostB", 0, 2, 4096, Clock::now() + std::chrono::seconds(5), again), nullptr);
    EXPECT_EQ(again.code(), StatusCode::io) << again.text();
    // A rank that expects another shape is told so.
    Status shape;
    EXPECT_EQ(HostSegment::attach(id, "hostB", 1, 2, 8192, Clock::now() + std::chrono::milliseconds(50), shape), nullptr);
    EXPECT_FALSE(shape.ok());
  }
  EXPECT_FALSE(name_exists(HostSegment::name_of(id, "hostB")));
  // A local rank that never comes to a call: the others' stage times out.
  auto a = HostSegment::attach(id, "hostC", 0, 2, 4096, Clock::now() + std::chrono::seconds(5), st);
  ASSERT_NE(a, nullptr);
  auto b = HostSegment::attach(id, "hostC", 1, 2, 4096, Clock::now() + std::chrono::seconds(5), st);
  ASSERT_NE(b, nullptr);
  HostStages stages(*a, 0);
  float in[4] = {1, 2, 3, 4}, reduced[2];
  const Status late = stages.reduce_scatter(in, 4, {0, 2}, reduced, Clock::now() + std::chrono::milliseconds(50));
  EXPECT_EQ(late.code(), StatusCode::timeout) << late.text();
}

// Two local ranks of one host, attached (as threads, each its own mapping).
struct TwoLocalRanks {
  std::unique_ptr<HostSegment> a, b;
  TwoLocalRanks(std::uint64_t id, const char* host) {
    Status st;
    a = HostSegment::attach(id, host, 0, 2, 4096, Clock::now() + std::chrono::seconds(60), st);
    b = HostSegment::attach(id, host, 1, 2, 4096, Clock::now() + std::chrono::seconds(60), st);
  }
};

Clock::time_point generous() { return Clock::now() + std::chrono::seconds(60); }

// A local rank that comes after another gave up on it fails the stage too (the host's verdict),
// where alone it would have found everything there and succeeded.
TEST(HostStages, ReduceScatterLateRankFailsWithTheOneThatGaveUp) {
  TwoLocalRanks host(unique_id(), "hostD");
  ASSERT_TRUE(host.a && host.b);
  HostStages a(*host.a, 0), b(*host.b, 1);
  float in[4] = {1, 2, 3, 4}, reduced[2] = {-1, -1};
  const Status gave_up = a.reduce_scatter(in, 4, {0, 2}, reduced, Clock::now());  // b is not there yet
  EXPECT_EQ(gave_up.code(), StatusCode::timeout) << gave_up.text();
  const Status late = b.reduce_scatter(in, 4, {2, 4}, reduced, generous());
  EXPECT_FALSE(late.ok()) << "the late rank succeeded the reduce-scatter its host failed";
}

// A rank that waits for a local rank sleeps (hierarchy/shared_wait.hpp) rather than spin: its
// wait still ends at its deadline where nobody comes...
TEST(HostStages, ASleepingWaitEndsAtItsDeadline) {
  TwoLocalRanks host(unique_id(), "hostH");
  ASSERT_TRUE(host.a && host.b);
  HostStages a(*host.a, 0);
  float in[4] = {1, 2, 3, 4}, reduced[2] = {-1, -1};
  const Status alone = a.reduce_scatter(in, 4, {0, 2}, reduced, Clock::now() + std::chrono::milliseconds(30));
  EXPECT_EQ(alone.code(), StatusCode::timeout) << alone.text();
}

// ... and wakes when the late one comes, with the host's sum on both.
TEST(HostStages, ASleepingWaitWakesForALateLocalRank) {
  TwoLocalRanks host(unique_id(), "hostI");
  ASSERT_TRUE(host.a && host.b);
  HostStages a(*host.a, 0), b(*host.b, 1);
  float in_a[4] = {1, 2, 3, 4}, in_b[4] = {10, 20, 30, 40}, ra[2] = {-1, -1}, rb[2] = {-1, -1};
  Status sa, sb;
  std::thread late([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    sb = b.reduce_scatter(in_b, 4, {2, 4}, rb, generous());
  });
  sa = a.reduce_scatter(in_a, 4, {0, 2}, ra, generous());
  late.join();
  ASSERT_TRUE(sa.ok()) << sa.text();
  ASSERT_TRUE(sb.ok()) << sb.text();
  EXPECT_EQ(ra[0], 11.0f);
  EXPECT_EQ(ra[1], 22.0f);
  EXPECT_EQ(rb[0], 33.0f);
  EXPECT_EQ(rb[1], 44.0f);
}

// Both local ranks reduce-scatter {1,2,3,4} + {10,20,30,40}: a holds elements 0-1, b 2-3.
void reduce_scatter_both(HostStages& a, HostStages& b, float (&ra)[2], float (&rb)[2], Status& sa, Status& sb) {
  float in_a[4] = {1, 2, 3, 4}, in_b[4] = {10, 20, 30, 40};
  std::thread ta([&] { sa = a.reduce_scatter(in_a, 4, {0, 2}, ra, generous()); });
  sb = b.reduce_scatter(in_b, 4, {2, 4}, rb, generous());
  ta.join();
}

// Two local ranks of one host through one reduce-scatter of reduce_scatter_both.
struct ReducedHost {
  TwoLocalRanks host;
  std::unique_ptr<HostStages> a, b;
  float ra[2] = {-1, -1}, rb[2] = {-1, -1};
  Status sa, sb;
  explicit ReducedHost(const char* name) : host(unique_id(), name) {
    if (!host.a || !host.b) return;
    a = std::make_unique<HostStages>(*host.a, 0);
    b = std::make_unique<HostStages>(*host.b, 1);
    reduce_scatter_both(*a, *b, ra, rb, sa, sb);
  }
  bool ok() const { return a && b && sa.ok() && sb.ok(); }
};

TEST(HostStages, AllGatherLateRankFailsWithTheOneThatGaveUp) {
  ReducedHost h("hostE");
  ASSERT_TRUE(h.ok()) << h.sa.text() << " / " << h.sb.text();
  EXPECT_EQ(h.ra[0], 11.0f);
  EXPECT_EQ(h.rb[1], 44.0f);
  float out_a[4] = {0, 0, 0, 0}, out_b[4] = {0, 0, 0, 0};
  const Status gave_up = h.a->all_gather(h.ra, {0, 2}, out_a, 4, Clock::now());  // b is not there yet
  EXPECT_EQ(gave_up.code(), StatusCode::timeout) << gave_up.text();
  const Status late = h.b->all_gather(h.rb, {2, 4}, out_b, 4, generous());
  EXPECT_FALSE(late.ok()) << "the late rank succeeded the all-gather its host failed";
  EXPECT_EQ(out_b[0], 0.0f) << "a failed all-gather wrote the caller's output";
}

// A rank that marked progress (it is in a slice's exchange) is waited for past the deadline,
// within the grace: both succeed, with the host's sum.
TEST(HostStages, AllGatherWaitsForALocalRankStillInItsExchange) {
  ReducedHost h("hostF");
  ASSERT_TRUE(h.ok()) << h.sa.text() << " / " << h.sb.text();
  h.b->mark_progress();
  float out_a[4] = {0, 0, 0, 0}, out_b[4] = {0, 0, 0, 0};
  std::thread late([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    h.sb = h.b->all_gather(h.rb, {2, 4}, out_b, 4, generous());
  });
  h.sa = h.a->all_gather(h.ra, {0, 2}, out_a, 4, Clock::now(), false, nullptr, std::chrono::seconds(60));
  late.join();
  ASSERT_TRUE(h.sa.ok()) << h.sa.text();
  ASSERT_TRUE(h.sb.ok()) << h.sb.text();
  const float sum[4] = {11, 22, 33, 44};
  for (int i = 0; i < 4; ++i) {
    EXPECT_EQ(out_a[i], sum[i]);
    EXPECT_EQ(out_b[i], sum[i]);
  }
}

// A rank whose part failed leaves the result area alone: nobody takes this call's result, and a
// local rank may still be copying the last call's out of it.
TEST(HostStages, AFailedPartDoesNotWriteTheResultArea) {
  ReducedHost h("hostG");
  ASSERT_TRUE(h.ok()) << h.sa.text() << " / " << h.sb.text();
  float out_a[4], out_b[4];
  std::thread tb([&] { h.sb = h.b->all_gather(h.rb, {2, 4}, out_b, 4, generous()); });
  h.sa = h.a->all_gather(h.ra, {0, 2}, out_a, 4, generous());
  tb.join();
  ASSERT_TRUE(h.sa.ok() && h.sb.ok()) << h.sa.text() << " / " << h.sb.text();
  reduce_scatter_both(*h.a, *h.b, h.ra, h.rb, h.sa, h.sb);
  ASSERT_TRUE(h.sa.ok() && h.sb.ok());
  const float garbage[2] = {-7, -7};
  h.sa = h.a->all_gather(garbage, {0, 2}, out_a, 4, generous(), true);
  EXPECT_FALSE(h.sa.ok());
  const auto* kept = static_cast<const float*>(h.a->result_range({0, 2}));
  EXPECT_EQ(kept[0], 11.0f) << "a failed part overwrote the last call's result";
  EXPECT_EQ(kept[1], 22.0f);
  h.sb = h.b->all_gather(h.rb, {2, 4}, out_b, 4, generous());
  EXPECT_FALSE(h.sb.ok()) << "the host's verdict let a rank succeed beside a failed part";
}

}  // namespace
}  // namespace optireduce
