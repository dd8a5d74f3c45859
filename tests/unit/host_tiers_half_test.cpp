// Float16 and bfloat16 allreduces in three stages (hierarchy/host_tiers.hpp, host_stages.hpp,
// host_sum.hpp): ranks as threads, "hosts" sharing a real POSIX shared-memory segment, each
// slice's exchange a real engine over the in-process transport.
//
// What is checked, and why it can fail:
//  - inside a host, each element's local parts are widened, added in float32 in local-rank order
//    and rounded once to the format, the same bits on every local rank, with every cut on a
//    cache line of 2-byte elements;
//  - across hosts each host's rounded sum is summed again as the flat 16-bit call sums (two hosts:
//    one float32 addition, whatever its order), so a value that rounds inside a host is checked
//    bitwise against that two-level rule, not the flat call's single rounding;
//  - sums exact in the format (small integers) are exact on every rank, for even and uneven
//    placements, a host of one rank and buffers shorter than the slices;
//  - the exchanges carry 2-byte elements: a 16-bit call sends about half a float32 call's bytes;
//  - bounded calls under cross-host loss keep every replica bitwise identical on every rank.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <thread>
#include <vector>

#include <unistd.h>

#include "first_copy_loss.hpp"
#include "half_vectors.hpp"
#include "optireduce/engine/hierarchy/host_stages.hpp"
#include "optireduce/engine/hierarchy/host_sum.hpp"
#include "tiers_job.hpp"

namespace optireduce {
namespace {

using testing::Half;
using testing::InProcNetwork;
using testing::TiersJob;
using testing::TiersOutcome;

constexpr ElementFormat kHalves[] = {ElementFormat::float16, ElementFormat::bfloat16};

float widen_one(ElementFormat f, std::uint16_t h) {
  float x;
  widen(f, &h, &x, 1);
  return x;
}
std::uint16_t narrow_one(ElementFormat f, float x) {
  std::uint16_t h;
  narrow(f, &x, &h, 1);
  return h;
}

// Local rank `local`'s input in `call`: gradient-like values, most of which do not sum exactly.
Half stage_input(ElementFormat f, int local, int call, std::size_t n) {
  return testing::to_half(f, testing::gradient_like(static_cast<unsigned>(100 * call + local + 1), n));
}

TEST(HostStagesHalf, EachElementSummedInFloat32AndRoundedOnceTheSameOnEveryLocalRank) {
  for (const ElementFormat f : kHalves) {
    constexpr int kLocal = 3, kCalls = 4;
    const std::uint64_t id = (static_cast<std::uint64_t>(getpid()) << 32) ^ std::random_device{}();
    const std::size_t most = 20011;
    std::vector<std::vector<Half>> outputs(kLocal, std::vector<Half>(kCalls));
    std::vector<Status> failures(kLocal);
    auto run = [&](int local) {
      Status st;
      auto seg = HostSegment::attach(id, "hostH16", local, kLocal, most * 2, Clock::now() + std::chrono::seconds(60), st);
      if (!seg) {
        failures[local] = st;
        return;
      }
      HostStages stages(*seg, local);
      for (int call = 0; call < kCalls; ++call) {
        const std::size_t n = most - static_cast<std::size_t>(call) * 3001;  // lengths change between calls
        const Half in = stage_input(f, local, call, n);
        const ElementRange mine = local_range(local, kLocal, n, host_granule(f));
        EXPECT_EQ(mine.begin * 2 % 64, 0u) << "a cut inside a cache line";
        Half reduced(mine.size());
        auto& out = outputs[local][call];
        out.assign(n, 0xFFFF);
        const auto deadline = Clock::now() + std::chrono::seconds(60);
        // Every other call sums straight into this rank's range of the result area (HostTiers' way).
        void* sum = call % 2 ? static_cast<void*>(reduced.data()) : stages.result_range(mine, f);
        if (Status s = stages.reduce_scatter(in.data(), n, mine, sum, deadline, f); !s.ok()) failures[local] = s;
        else if (Status g = stages.all_gather(sum, mine, out.data(), n, deadline, false, nullptr, {}, f); !g.ok())
          failures[local] = g;
        if (!failures[local].ok()) return;
      }
    };
    std::vector<std::thread> threads;
    for (int l = 0; l < kLocal; ++l) threads.emplace_back(run, l);
    for (auto& t : threads) t.join();
    for (int l = 0; l < kLocal; ++l) ASSERT_TRUE(failures[l].ok()) << failures[l].text();
    for (int call = 0; call < kCalls; ++call) {
      const std::size_t n = outputs[0][call].size();
      std::vector<Half> in;
      for (int l = 0; l < kLocal; ++l) in.push_back(stage_input(f, l, call, n));
      std::size_t rounded = 0;
      for (std::size_t i = 0; i < n; ++i) {
        float s = widen_one(f, in[0][i]);
        double exact = s;
        for (int l = 1; l < kLocal; ++l) s += widen_one(f, in[l][i]), exact += widen_one(f, in[l][i]);
        const std::uint16_t want = narrow_one(f, s);
        rounded += widen_one(f, want) != exact;
        ASSERT_EQ(outputs[0][call][i], want) << to_string(f) << " call " << call << " element " << i;
      }
      EXPECT_GT(rounded, n / 4) << "too few sums round: the test would not tell one rounding from another";
      for (int l = 1; l < kLocal; ++l) EXPECT_EQ(outputs[l][call], outputs[0][call]) << "local rank " << l << " call " << call;
    }
  }
}

TiersOutcome run_half_job(const std::vector<int>& counts, ElementFormat f, int calls, std::uint64_t count,
                          std::function<float(int, int, std::uint64_t)> value_of = nullptr) {
  TiersJob job;
  job.counts = counts, job.calls = calls, job.count = count, job.format = f, job.value_of = std::move(value_of);
  return testing::run_tiers_job(job);
}

// Small integers: exact in both formats (|sum| <= 8 per rank), whatever the order or rounding.
void expect_exact(const std::vector<int>& counts, std::uint64_t count) {
  for (const ElementFormat f : kHalves) {
    const int calls = 2, ranks = placement_from_counts(counts).ranks();
    const TiersOutcome out = run_half_job(counts, f, calls, count);
    ASSERT_TRUE(out.all_tiered);
    for (int c = 0; c < calls; ++c) {
      const auto sum = testing::tiers_exact_sum(ranks, c, count);
      for (int r = 0; r < ranks; ++r) {
        const std::size_t at = static_cast<std::size_t>(c * ranks + r);
        ASSERT_TRUE(out.stats[at].ok()) << to_string(f) << " rank " << r << " call " << c << ": " << out.stats[at].status.text();
        EXPECT_TRUE(out.stats[at].stages.hierarchical);
        EXPECT_EQ(out.stats[at].shape.format, f);
        ASSERT_EQ(out.results[at], sum) << to_string(f) << " rank " << r << " call " << c;
      }
    }
  }
}

TEST(HostTiersHalf, ExactSumTwoHostsOfTwo) { expect_exact({2, 2}, 10000); }
TEST(HostTiersHalf, ExactSumUnevenThreePlusTwo) { expect_exact({3, 2}, 10007); }
TEST(HostTiersHalf, ExactSumHostOfOneRank) { expect_exact({1, 3, 2}, 5001); }
TEST(HostTiersHalf, ExactSumThreeHostsOfTwo) { expect_exact({2, 2, 2}, 4099); }
TEST(HostTiersHalf, ExactSumBufferShorterThanTheSlices) { expect_exact({3, 2}, 5); }

// Two hosts: each host's sum widened, added in float32 in local-rank order, rounded once; then the
// two hosts' sums added in float32 (one addition: either order gives the same bits) and rounded.
void expect_two_level_rounding(const std::vector<int>& counts, ElementFormat f) {
  const Placement placement = placement_from_counts(counts);
  ASSERT_EQ(placement.hosts(), 2);
  const int ranks = placement.ranks(), calls = 2;
  const std::uint64_t count = 12007;
  std::vector<std::vector<float>> inputs;  // [call * ranks + rank], already of the format
  for (int c = 0; c < calls; ++c)
    for (int r = 0; r < ranks; ++r)
      inputs.push_back(testing::to_float(f, testing::to_half(f, testing::gradient_like(static_cast<unsigned>(7 + 50 * c + r), count))));
  // Element 0 of call 0 on 2 + 2 in fp16: 1024 + 0.5 rounds to 1024 (ties to even) on host 0, 1 + 2
  // is 3 on host 1: 1027, where one rounding of 1027.5 would give 1028.
  const bool pinned = f == ElementFormat::float16 && counts == std::vector<int>{2, 2};
  if (pinned)
    for (int r = 0; r < ranks; ++r) inputs[static_cast<std::size_t>(r)][0] = std::vector<float>{1024, 0.5, 1, 2}[r];
  const TiersOutcome out = run_half_job(counts, f, calls, count, [&](int r, int c, std::uint64_t i) {
    return inputs[static_cast<std::size_t>(c * ranks + r)][i];
  });
  ASSERT_TRUE(out.all_tiered);
  for (int c = 0; c < calls; ++c) {
    std::vector<float> want(count);
    for (std::uint64_t i = 0; i < count; ++i) {
      float hosts = 0;
      for (int h = 0; h < 2; ++h) {
        float s = 0;
        bool first = true;
        for (int r : placement.ranks_of_host[static_cast<std::size_t>(h)]) {
          const float v = inputs[static_cast<std::size_t>(c * ranks + r)][i];
          s = first ? v : s + v, first = false;
        }
        const float host = widen_one(f, narrow_one(f, s));
        hosts = h == 0 ? host : hosts + host;
      }
      want[i] = widen_one(f, narrow_one(f, hosts));
    }
    if (pinned && c == 0) {
      EXPECT_EQ(want[0], 1027.0f);
    }
    for (int r = 0; r < ranks; ++r) {
      const std::size_t at = static_cast<std::size_t>(c * ranks + r);
      ASSERT_TRUE(out.stats[at].ok()) << to_string(f) << " rank " << r << " call " << c << ": " << out.stats[at].status.text();
      ASSERT_EQ(out.results[at], want) << to_string(f) << " rank " << r << " call " << c;
    }
  }
}

TEST(HostTiersHalf, AHostRoundsItsSumOnceFloat16TwoHostsOfTwo) { expect_two_level_rounding({2, 2}, ElementFormat::float16); }
TEST(HostTiersHalf, AHostRoundsItsSumOnceBfloat16TwoHostsOfTwo) { expect_two_level_rounding({2, 2}, ElementFormat::bfloat16); }
TEST(HostTiersHalf, AHostRoundsItsSumOnceFloat16Uneven) { expect_two_level_rounding({3, 2}, ElementFormat::float16); }
TEST(HostTiersHalf, AHostRoundsItsSumOnceBfloat16HostOfOneRank) { expect_two_level_rounding({1, 3}, ElementFormat::bfloat16); }

// The slices' exchanges send 2-byte elements: summed over every rank and call, a 16-bit job's
// network bytes are about half a float32 job's of as many elements (headers are the same count).
TEST(HostTiersHalf, ExchangesSendHalfTheBytesOfFloat32) {
  const std::vector<int> counts{2, 2};
  const int ranks = 4, calls = 2;
  auto network_bytes = [&](ElementFormat f) {
    TiersJob job;
    job.counts = counts, job.calls = calls, job.count = 100000, job.format = f;
    const TiersOutcome out = testing::run_tiers_job(job);
    EXPECT_TRUE(out.all_tiered);
    std::uint64_t bytes = 0;
    for (int at = 0; at < calls * ranks; ++at) {
      EXPECT_TRUE(out.stats[static_cast<std::size_t>(at)].ok());
      bytes += out.stats[static_cast<std::size_t>(at)].stages.network_bytes;
    }
    return static_cast<double>(bytes);
  };
  const double wide = network_bytes(ElementFormat::float32);
  ASSERT_GT(wide, 0.0);
  for (const ElementFormat f : kHalves) {
    const double ratio = network_bytes(f) / wide;
    EXPECT_GT(ratio, 0.45) << to_string(f);
    EXPECT_LT(ratio, 0.55) << to_string(f);
  }
}

// Bounded calls past calibration, cross-host datagrams lost (and resent) and chunks discarded at
// receivers: every replica bitwise identical, exact where no entry was dropped.
void expect_consistent_under_loss(const std::vector<int>& counts, ElementFormat f) {
  TiersJob job;
  job.options.hadamard = HadamardMode::off;  // a dropped chunk then shows in its own entries only
  job.options.chunk_elems = 64;
  job.options.timeout = std::chrono::milliseconds(20000);
  job.options.calibration_calls = 2;
  job.options.loss_budget = 1.0;
  job.options.faults.drop = 0.02;
  job.options.faults.seed = 17;
  testing::FirstCopyLoss loss;
  InProcNetwork network;
  network.drop = [&loss](int from, int to, std::span<const std::byte> h) { return loss(from, to, h); };
  job.counts = counts, job.calls = 10, job.count = 20000, job.format = f, job.network = &network, job.bounded = true;
  const TiersOutcome out = testing::run_tiers_job(job);
  ASSERT_TRUE(out.all_tiered);
  const int ranks = placement_from_counts(counts).ranks();
  std::uint64_t bounded = 0, dropped = 0;
  for (int c = 0; c < job.calls; ++c) {
    const auto sum = testing::tiers_exact_sum(ranks, c, job.count);
    const std::size_t first = static_cast<std::size_t>(c * ranks);
    for (int r = 0; r < ranks; ++r) {
      const std::size_t at = first + static_cast<std::size_t>(r);
      ASSERT_TRUE(out.stats[at].ok()) << "rank " << r << " call " << c << ": " << out.stats[at].status.text();
      ASSERT_EQ(out.results[at], out.results[first]) << "replica of rank " << r << ", call " << c;
      EXPECT_EQ(out.stats[at].dropped_entries, out.stats[first].dropped_entries) << "rank " << r << ", call " << c;
      bounded += out.stats[at].kind == CallKind::bounded;
    }
    std::uint64_t differing = 0;
    for (std::uint64_t i = 0; i < job.count; ++i) differing += out.results[first][i] != sum[i];
    EXPECT_LE(differing, out.stats[first].dropped_entries) << "call " << c << ": every wrong entry is counted as dropped";
    dropped += out.stats[first].dropped_entries;
  }
  EXPECT_GT(bounded, 0u) << "no call ran bounded past calibration";
  EXPECT_GT(dropped, 0u) << "the injected loss dropped nothing: the test tests nothing";
}

TEST(HostTiersHalf, ReplicasIdenticalUnderCrossHostLossFloat16TwoHostsOfTwo) {
  expect_consistent_under_loss({2, 2}, ElementFormat::float16);
}
TEST(HostTiersHalf, ReplicasIdenticalUnderCrossHostLossBfloat16Uneven) {
  expect_consistent_under_loss({3, 2}, ElementFormat::bfloat16);
}

}  // namespace
}  // namespace optireduce
