// Reduce-scatters in three stages (hierarchy/scatter_map.hpp, hierarchy/host_reduce_scatter.cpp):
// the mapping of blocks onto slices, and in-process jobs (ranks as threads, hosts sharing a real
// POSIX shared-memory segment, each slice's exchange a real engine over the in-process transport).
//
// What is checked, and why it can fail:
//  - the mapping: the pieces of every slice tile it in host order, the pieces each host receives
//    tile its part, each host's link carries B − B_h out and (H−1)·B_h in; placements whose hosts'
//    ranks are not consecutive, and calls where a host owns nothing, are named as flat;
//  - exact calls give each rank the exact sum of its block (small integers), for even and
//    uneven placements, uneven blocks with empty ones, blocks shorter than the slices, in place
//    and not, float32 and 16-bit; the calls say they ran in three stages (or flat, where they must);
//  - bounded calls under cross-host loss: every entry is the sum of its own host's part and some
//    other hosts' (a lost contribution left out, never rescaled), and every wrong one is counted;
//  - a failure inside one host fails the call on every rank of every host;
//  - a slice's exchange: a rank that owns an empty block leaves it failed where a peer failed it
//    (it waits for every block to close), and succeeds where the peer that owns the data comes
//    late.
#include <gtest/gtest.h>

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <numeric>
#include <thread>

#include "first_copy_loss.hpp"
#include "optireduce/engine/hierarchy/scatter_map.hpp"
#include "tiers_job.hpp"

namespace optireduce {
namespace {

using testing::InProcNetwork;
using testing::TiersJob;
using testing::TiersOutcome;

constexpr std::size_t kGranule = 16;  // the cut granule of float32 calls (host_granule)

// For every slice of `counts` over `blocks`: the pieces tile the slice in host order; each host's
// pieces tile its part; and each host sends B − B_h and receives (H−1)·B_h over its link.
void expect_mapping(const std::vector<int>& counts, const std::vector<std::uint64_t>& blocks) {
  const Placement p = placement_from_counts(counts);
  ASSERT_EQ(reduce_scatter_flat_reason(p), "");
  const std::uint64_t total = std::accumulate(blocks.begin(), blocks.end(), std::uint64_t{0});
  const auto bounds = host_part_bounds(p, blocks);
  ASSERT_EQ(bounds.front(), 0u);
  ASSERT_EQ(bounds.back(), total);
  const auto map = map_slices(p);
  const auto hosts = static_cast<std::size_t>(p.hosts());
  std::vector<std::uint64_t> sent(hosts, 0), received(hosts, 0), next(bounds.begin(), bounds.end() - 1);
  for (int s = 0; s < static_cast<int>(map.slices.size()); ++s) {
    const ElementRange r = map.elements_of(s, total, kGranule);
    const auto pieces = slice_blocks(r, bounds);
    ASSERT_EQ(pieces.size(), hosts);
    EXPECT_EQ(std::accumulate(pieces.begin(), pieces.end(), std::uint64_t{0}), r.size()) << "slice " << s;
    std::uint64_t at = r.begin;
    for (std::size_t h = 0; h < hosts; ++h) {
      if (pieces[h] != 0) {
        EXPECT_EQ(at, next[h]) << "slice " << s << ", host " << h << ": its piece does not follow its last one";
        EXPECT_GE(at, bounds[h]);
        EXPECT_LE(at + pieces[h], bounds[h + 1]) << "slice " << s << ", host " << h << ": a piece outside its part";
        next[h] = at + pieces[h];
      }
      at += pieces[h];
      received[h] += (hosts - 1) * pieces[h];
      sent[h] += r.size() - pieces[h];
    }
  }
  for (std::size_t h = 0; h < hosts; ++h) {
    const std::uint64_t part = bounds[h + 1] - bounds[h];
    EXPECT_EQ(next[h], bounds[h + 1]) << "host " << h << " did not receive the whole of its part";
    EXPECT_EQ(sent[h], total - part) << "host " << h;
    EXPECT_EQ(received[h], (hosts - 1) * part) << "host " << h;
  }
}

TEST(ScatterMap, EvenBlocksTwoHostsOfTwo) {
  expect_mapping({2, 2}, std::vector<std::uint64_t>(4, 4096));
  // Each host's part is one slice: each holder only receives or only sends in its exchange.
  const auto bounds = host_part_bounds(placement_from_counts({2, 2}), std::vector<std::uint64_t>(4, 4096));
  EXPECT_EQ(slice_blocks({0, 8192}, bounds), (std::vector<std::uint64_t>{8192, 0}));
  EXPECT_EQ(slice_blocks({8192, 16384}, bounds), (std::vector<std::uint64_t>{0, 8192}));
}
TEST(ScatterMap, EvenBlocksThreeHostsOfTwo) { expect_mapping({2, 2, 2}, std::vector<std::uint64_t>(6, 1000)); }
TEST(ScatterMap, EvenBlocksFourHostsOfThree) { expect_mapping({3, 3, 3, 3}, std::vector<std::uint64_t>(12, 777)); }
TEST(ScatterMap, UnevenBlocksWithEmptyOnes) {
  expect_mapping({3, 2}, {1000, 0, 3001, 17, 2000});
  expect_mapping({1, 3, 2}, {0, 5, 0, 9000, 1, 333});
  expect_mapping({2, 2}, {0, 1, 1, 0});  // shorter than the slices' granule
  expect_mapping({8, 7, 5}, std::vector<std::uint64_t>(20, 123));
}

TEST(ScatterMap, PlacementsThatStayFlat) {
  // Round-robin: host a holds ranks 0 and 2, whose blocks are not one range.
  const Placement rr = placement_from_names({"a", "b", "a", "b"});
  EXPECT_NE(reduce_scatter_flat_reason(rr).find("not consecutive"), std::string::npos) << reduce_scatter_flat_reason(rr);
  EXPECT_EQ(reduce_scatter_flat_reason(placement_from_names({"a", "a", "b", "b", "b"})), "");
  // A host whose ranks own nothing.
  const auto bounds = host_part_bounds(placement_from_counts({2, 2}), std::vector<std::uint64_t>{5, 3, 0, 0});
  EXPECT_NE(empty_part_reason(bounds), "");
  EXPECT_EQ(empty_part_reason(host_part_bounds(placement_from_counts({2, 2}), std::vector<std::uint64_t>{0, 3, 0, 1})), "");
}

// The exact sum of rank r's block in call c.
std::vector<float> block_sum(const std::vector<std::uint64_t>& blocks, int r, int c) {
  const auto ranks = static_cast<int>(blocks.size());
  const std::uint64_t total = std::accumulate(blocks.begin(), blocks.end(), std::uint64_t{0});
  const std::uint64_t begin = std::accumulate(blocks.begin(), blocks.begin() + r, std::uint64_t{0});
  const auto sum = testing::tiers_exact_sum(ranks, c, total);
  return {sum.begin() + static_cast<std::ptrdiff_t>(begin), sum.begin() + static_cast<std::ptrdiff_t>(begin + blocks[static_cast<std::size_t>(r)])};
}

void expect_exact_blocks(TiersJob job, const std::vector<std::uint64_t>& blocks, bool hierarchical) {
  job.calls = 4;
  job.blocks_of = [&](int) { return blocks; };
  const TiersOutcome out = testing::run_tiers_job(job);
  ASSERT_TRUE(out.all_tiered);
  const int ranks = static_cast<int>(blocks.size());
  for (int c = 0; c < job.calls; ++c)
    for (int r = 0; r < ranks; ++r) {
      const std::size_t at = static_cast<std::size_t>(c * ranks + r);
      ASSERT_TRUE(out.stats[at].ok()) << "rank " << r << " call " << c << ": " << out.stats[at].status.text();
      EXPECT_EQ(out.stats[at].stages.hierarchical, hierarchical) << "rank " << r << " call " << c;
      EXPECT_EQ(out.stats[at].entries, blocks[static_cast<std::size_t>(r)]);
      EXPECT_EQ(out.stats[at].shape, (CallShape{Collective::reduce_scatter, job.format}));
      ASSERT_EQ(out.results[at], block_sum(blocks, r, c)) << "rank " << r << " call " << c;
    }
}

TiersJob counts_job(const std::vector<int>& counts) {
  TiersJob job;
  job.counts = counts;
  return job;
}

TEST(HostReduceScatter, ExactEvenTwoHostsOfTwo) { expect_exact_blocks(counts_job({2, 2}), std::vector<std::uint64_t>(4, 2500), true); }
TEST(HostReduceScatter, ExactEvenThreeHostsOfTwo) { expect_exact_blocks(counts_job({2, 2, 2}), std::vector<std::uint64_t>(6, 1001), true); }
TEST(HostReduceScatter, ExactUnevenBlocksWithEmptyOnes) {
  expect_exact_blocks(counts_job({3, 2}), {1000, 0, 3001, 17, 2000}, true);
  expect_exact_blocks(counts_job({1, 3, 2}), {7, 0, 5, 9000, 0, 333}, true);
}
// 16-bit elements: the host stages and the exchanges carry them as they do an allreduce's; small
// integers stay exact.
TEST(HostReduceScatter, ExactFloat16) {
  TiersJob job = counts_job({3, 2});
  job.format = ElementFormat::float16;
  expect_exact_blocks(job, {1000, 0, 3001, 17, 2000}, true);
}
TEST(HostReduceScatter, ExactBfloat16) {
  TiersJob job = counts_job({2, 2});
  job.format = ElementFormat::bfloat16;
  expect_exact_blocks(job, std::vector<std::uint64_t>(4, 2500), true);
}
TEST(HostReduceScatter, ExactBlocksShorterThanTheSlices) { expect_exact_blocks(counts_job({3, 2}), {1, 0, 2, 1, 1}, true); }
TEST(HostReduceScatter, ExactOverTheJobsMpi) {
  TiersJob job = counts_job({2, 3});
  InProcNetwork clean;
  job.network = &clean, job.exact_over_mpi = true;
  expect_exact_blocks(job, {300, 301, 0, 5000, 7}, true);
}
TEST(HostReduceScatter, RoundRobinPlacementStaysFlat) {
  TiersJob job;
  job.names = {"a", "b", "a", "b"};
  expect_exact_blocks(job, {100, 2000, 30, 4000}, false);
}
TEST(HostReduceScatter, HostOwningNothingStaysFlat) { expect_exact_blocks(counts_job({2, 2}), {3000, 5000, 0, 0}, false); }

// Bounded calls past calibration, cross-host datagrams lost (and resent) and chunks discarded at
// receivers (never resent): each entry is its own host's part of the sum plus some other hosts'
// (never rescaled), and the entries that are not the whole sum are counted as dropped.
void expect_explained_under_loss(const std::vector<int>& counts, const std::vector<std::uint64_t>& blocks) {
  TiersJob job;
  job.counts = counts, job.calls = 12, job.bounded = true;
  job.options.chunk_elems = 64;
  job.options.timeout = std::chrono::milliseconds(20000);
  job.options.calibration_calls = 2;
  job.options.loss_budget = 1.0;
  job.options.faults.drop = 0.02;
  job.options.faults.seed = 11;
  testing::FirstCopyLoss loss;
  InProcNetwork network;
  network.drop = [&loss](int from, int to, std::span<const std::byte> h) { return loss(from, to, h); };
  job.network = &network;
  job.blocks_of = [&](int) { return blocks; };
  const TiersOutcome out = testing::run_tiers_job(job);
  ASSERT_TRUE(out.all_tiered);
  const Placement p = placement_from_counts(counts);
  const int ranks = p.ranks();
  const std::uint64_t total = std::accumulate(blocks.begin(), blocks.end(), std::uint64_t{0});
  std::uint64_t bounded = 0, dropped = 0;
  for (int c = 0; c < job.calls; ++c) {
    // Each host's sum of every element: what its holder contributes to the exchanges.
    std::vector<std::vector<double>> host_sum(static_cast<std::size_t>(p.hosts()), std::vector<double>(total, 0.0));
    for (int r = 0; r < ranks; ++r)
      for (std::uint64_t i = 0; i < total; ++i) host_sum[static_cast<std::size_t>(p.host_of_rank[r])][i] += testing::tiers_value(r, c, i);
    for (int r = 0; r < ranks; ++r) {
      const std::size_t at = static_cast<std::size_t>(c * ranks + r);
      const CallStats& st = out.stats[at];
      ASSERT_TRUE(st.ok()) << "rank " << r << " call " << c << ": " << st.status.text();
      EXPECT_TRUE(st.stages.hierarchical);
      bounded += st.kind == CallKind::bounded;
      dropped += st.dropped_entries;
      EXPECT_LE(st.dropped_entries, st.entries);
      const std::uint64_t begin = std::accumulate(blocks.begin(), blocks.begin() + r, std::uint64_t{0});
      const auto want = block_sum(blocks, r, c);
      const auto own = static_cast<std::size_t>(p.host_of_rank[r]);
      std::uint64_t wrong = 0;
      for (std::size_t i = 0; i < want.size(); ++i) {
        const float got = out.results[at][i];
        if (got == want[i]) continue;
        ++wrong;
        bool explained = false;
        for (unsigned subset = 0; subset < (1u << p.hosts()) && !explained; ++subset) {
          if (!(subset >> own & 1u)) continue;
          double partial = 0;
          for (int h = 0; h < p.hosts(); ++h)
            if (subset >> h & 1u) partial += host_sum[static_cast<std::size_t>(h)][begin + i];
          explained = got == static_cast<float>(partial);
        }
        ASSERT_TRUE(explained) << "rank " << r << " call " << c << " element " << i << ": " << got;
      }
      EXPECT_LE(wrong, st.dropped_entries) << "rank " << r << " call " << c << ": every wrong entry is counted as dropped";
    }
  }
  EXPECT_GT(bounded, 0u) << "no call ran bounded past calibration";
  EXPECT_GT(dropped, 0u) << "the injected loss dropped nothing: the test tests nothing";
}

TEST(HostReduceScatter, UnderCrossHostLossTwoHostsOfTwo) { expect_explained_under_loss({2, 2}, std::vector<std::uint64_t>(4, 5000)); }
TEST(HostReduceScatter, UnderCrossHostLossUneven) { expect_explained_under_loss({3, 2}, {4000, 0, 9001, 3000, 4000}); }

// Host 1's segment for call 2 (larger than the first: a new one) cannot be made: calls 0 and 1
// succeed with the exact blocks, call 2 and later fail on every rank of both hosts.
TEST(HostReduceScatter, HostSegmentNotMadeFailsEveryHost) {
  const std::vector<int> counts{2, 2};
  const Placement placement = placement_from_counts(counts);
  TiersJob job;
  job.counts = counts, job.calls = 4;
  job.options.watchdog = std::chrono::milliseconds(3000);
  job.options.timeout = std::chrono::milliseconds(2000);
  job.blocks_of = [](int call) { return std::vector<std::uint64_t>(4, call < 2 ? 5000 : 75000); };  // past the 1 MiB slot
  const int blocker_rank = placement.ranks_of_host[1][0];
  std::string taken;
  job.before_call = [&](int rank, int call, const Engine& engine) {
    if (rank != blocker_rank || call != 2) return;
    taken = HostTiers::segment_name(engine.comm_id(), placement.host_names[1], 2);
    const int fd = shm_open(taken.c_str(), O_RDWR | O_CREAT | O_EXCL, 0600);
    ASSERT_GE(fd, 0) << taken;
    close(fd);
  };
  const TiersOutcome out = testing::run_tiers_job(job);
  if (!taken.empty()) shm_unlink(taken.c_str());
  ASSERT_FALSE(taken.empty());
  ASSERT_TRUE(out.all_tiered);
  for (int c = 0; c < job.calls; ++c)
    for (int r = 0; r < placement.ranks(); ++r) {
      const std::size_t at = static_cast<std::size_t>(c * placement.ranks() + r);
      if (c >= 2) {
        EXPECT_FALSE(out.stats[at].ok()) << "rank " << r << " succeeded call " << c << ", which must fail on every rank";
        continue;
      }
      ASSERT_TRUE(out.stats[at].ok()) << "rank " << r << " call " << c << ": " << out.stats[at].status.text();
      ASSERT_EQ(out.results[at], block_sum(job.blocks_of(c), r, c)) << "rank " << r << " call " << c;
    }
}

// One slice's exchange on its own: two ranks over the in-process (reliable) transport, rank 0
// owning an empty block. `fails_on_1`: rank 1's caller failed its part; `late_1`: rank 1 enters
// well after rank 0 (which sends everything and says its empty block is closed at once).
std::vector<CallStats> run_exchange(bool fails_on_1, bool late_1) {
  auto fabric = std::make_shared<testing::InProcFabric>(2);
  EngineOptions options;
  options.watchdog = std::chrono::milliseconds(3000);
  std::vector<CallStats> stats(2);
  std::vector<std::thread> threads;
  for (int r = 0; r < 2; ++r)
    threads.emplace_back([&, r] {
      Status status;
      auto engine = Engine::create(r, 2, std::make_unique<testing::InProcTransport>(fabric, r), nullptr,
                                   std::make_unique<testing::InProcBootstrap>(fabric, r), options, status);
      ASSERT_TRUE(engine) << status.text();
      const std::vector<std::uint64_t> blocks{0, 1000};
      std::vector<float> input(1000, static_cast<float>(r + 1)), output(1000, 0.0f);
      if (r == 1 && late_1) std::this_thread::sleep_for(std::chrono::milliseconds(200));
      const Status failed = r == 1 && fails_on_1 ? Invalid("this rank's host failed") : Status{};
      stats[static_cast<std::size_t>(r)] = engine->reduce_scatter(input.data(), output.data(), blocks, ElementFormat::float32, false, failed);
      if (r == 1 && stats[1].ok()) {
        EXPECT_EQ(output, std::vector<float>(1000, 3.0f));
      }
    });
  for (auto& t : threads) t.join();
  return stats;
}

TEST(HostReduceScatter, EmptyBlockLeavesFailedWhereAPeerFailed) {
  const auto stats = run_exchange(true, false);
  EXPECT_FALSE(stats[1].ok());
  EXPECT_FALSE(stats[0].ok()) << "the rank owning nothing left the exchange succeeded while its peer failed it";
}

TEST(HostReduceScatter, EmptyBlockWaitsForALatePeer) {
  const auto stats = run_exchange(false, true);
  EXPECT_TRUE(stats[0].ok()) << stats[0].status.text();
  EXPECT_TRUE(stats[1].ok()) << stats[1].status.text();
}

}  // namespace
}  // namespace optireduce
