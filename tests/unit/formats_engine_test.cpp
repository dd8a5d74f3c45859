// The engine's element formats and its reduce-scatter over the in-process transport (ranks as
// threads, the real schedule, header validation and deadlines). What is checked: 16-bit calls
// equal, bit for bit, the owner's float32 sum in its fixed order rounded once, on every rank; a
// reduce-scatter's block equals the same sum over the counts' layout (uneven, zeros, in place or
// not) and nothing beyond the block is written; bounded calls past calibration count what they
// drop, leave it out of the sum (never rescaled) and get back what the network lost by resends;
// each shape calibrates its own size class.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <functional>
#include <mutex>
#include <numeric>
#include <set>
#include <thread>
#include <tuple>

#include "first_copy_loss.hpp"
#include "inproc_transport.hpp"
#include "optireduce/elements/convert.hpp"
#include "optireduce/engine/engine/engine.hpp"
#include "optireduce/engine/tar/scatter_reduce.hpp"
#include "optireduce/engine/tar/wire_header.hpp"

namespace optireduce {
namespace {

using Job = testing::InProcJob;
constexpr ElementFormat kFormats[] = {ElementFormat::float32, ElementFormat::float16, ElementFormat::bfloat16};

EngineOptions options_of(unsigned calibration_calls = 20) {
  EngineOptions o;
  o.chunk_elems = 64;  // many chunks per shard, ragged last ones
  o.timeout = std::chrono::milliseconds(20000);
  o.calibration_calls = calibration_calls;
  o.hadamard = HadamardMode::off;
  return o;
}

// Element i of `rank`'s input for a call, in `format`'s bytes: values in [-2, 2) of every
// magnitude the format holds in that range (rounded from float32 once).
std::vector<std::byte> input_of(ElementFormat f, int rank, int call, std::uint64_t count) {
  std::vector<float> v(count);
  for (std::uint64_t i = 0; i < count; ++i) {
    std::uint64_t x = (i + 1) * 0x9e3779b97f4a7c15ull ^ (static_cast<std::uint64_t>(rank) + 1) * 0xbf58476d1ce4e5b9ull ^
                      (static_cast<std::uint64_t>(call) + 3) * 0x94d049bb133111ebull;
    x ^= x >> 29;
    x *= 0xd6e8feb86659fd39ull;
    x ^= x >> 31;
    v[i] = std::ldexp(static_cast<float>(static_cast<double>(x >> 40) / double(1ull << 24) * 2.0 - 1.0), -static_cast<int>(x % 12));
  }
  std::vector<std::byte> out(count * element_bytes(f));
  if (f == ElementFormat::float32) std::memcpy(out.data(), v.data(), out.size());
  else narrow(f, v.data(), out.data(), count);
  return out;
}

float element(ElementFormat f, const std::vector<std::byte>& b, std::uint64_t i) {
  if (f == ElementFormat::float32) {
    float x;
    std::memcpy(&x, b.data() + 4 * i, 4);
    return x;
  }
  float x;
  widen(f, b.data() + 2 * i, &x, 1);
  return x;
}

// The owner's result: widened contributions summed in float32 in the owner's order (its own
// first, then owner-1, owner-2, ...), rounded once; over `layout`'s shards.
std::vector<std::byte> owners_sum(ElementFormat f, const ShardLayout& layout, const std::vector<std::vector<std::byte>>& in) {
  const int ranks = layout.ranks();
  std::vector<float> sum(layout.total());
  for (int owner = 0; owner < ranks; ++owner)
    for (std::uint64_t i = layout.shard_begin(owner); i < layout.shard_begin(owner) + layout.shard_size(owner); ++i) {
      float s = element(f, in[owner], i);
      for (int place = 1; place < ranks; ++place) s += element(f, in[summation_source(owner, ranks, place)], i);
      sum[i] = s;
    }
  std::vector<std::byte> out(layout.total() * element_bytes(f));
  if (f == ElementFormat::float32) std::memcpy(out.data(), sum.data(), out.size());
  else narrow(f, sum.data(), out.data(), layout.total());
  return out;
}

// Runs `body(rank)` on every rank at once.
void on_every_rank(int ranks, const std::function<void(int)>& body) {
  std::vector<std::thread> threads;
  for (int r = 0; r < ranks; ++r) threads.emplace_back(body, r);
  for (auto& t : threads) t.join();
}

std::string named(ElementFormat f, int ranks, std::uint64_t count, bool in_place) {
  return std::string(to_string(f)) + ", " + std::to_string(ranks) + " ranks, " + std::to_string(count) + " elements" +
         (in_place ? ", in place" : "");
}

TEST(FormatsEngine, AllreduceRoundsTheOwnersFloat32SumOnce) {
  for (int ranks : {2, 3, 4}) {
    Job job = testing::start_inproc_job(ranks, options_of());
    for (ElementFormat f : kFormats)
      for (std::uint64_t count : {0ull, 1ull, 7ull, 1009ull, 20000ull})
        for (bool in_place : {false, true}) {
          SCOPED_TRACE(named(f, ranks, count, in_place));
          std::vector<std::vector<std::byte>> in(ranks), out(ranks);
          for (int r = 0; r < ranks; ++r) in[r] = input_of(f, r, 0, count);
          const auto want = owners_sum(f, ShardLayout(count, ranks, 1), in);
          std::vector<CallStats> stats(ranks);
          on_every_rank(ranks, [&](int r) {
            out[r] = in_place ? in[r] : std::vector<std::byte>(in[r].size(), std::byte{0x5a});
            stats[r] = job.engines[r]->allreduce(in_place ? out[r].data() : in[r].data(), out[r].data(), count, f);
          });
          for (int r = 0; r < ranks; ++r) {
            ASSERT_TRUE(stats[r].ok()) << stats[r].status.text();
            EXPECT_EQ(stats[r].shape, (CallShape{Collective::allreduce, f}));
            EXPECT_EQ(stats[r].entries, count);
            ASSERT_EQ(out[r], want) << "rank " << r;
          }
        }
  }
}

// The owner's order decides the bits: with these contributions float32 gives different sums in
// rank order and in the owner's order.
TEST(FormatsEngine, SixteenBitSumsFollowTheOwnersOrder) {
  const int ranks = 4;
  Job job = testing::start_inproc_job(ranks, options_of());
  const std::uint64_t count = 4096;
  for (ElementFormat f : {ElementFormat::float16, ElementFormat::bfloat16}) {
    SCOPED_TRACE(to_string(f));
    // Ranks 0 and 1 contribute big values that cancel, rank 2 another big one, rank 3 a small one:
    // in some orders the big ones cancel before the small one joins, in others it vanishes into a
    // big partial sum (past float32's 24 bits).
    const float big = f == ElementFormat::float16 ? 16384.0f : 16777216.0f;
    const float small = f == ElementFormat::float16 ? std::ldexp(1.0f, -20) : 1.0f;
    std::vector<std::vector<std::byte>> in(ranks);
    for (int r = 0; r < ranks; ++r) {
      std::vector<float> v(count);
      for (std::uint64_t i = 0; i < count; ++i)
        v[i] = r == 0 ? big * float(i % 3) : r == 1 ? -big * float(i % 3) : r == 2 ? big * float(i / 3 % 3) : small * float(1 + i % 5);
      in[r].resize(count * 2);
      narrow(f, v.data(), in[r].data(), count);
    }
    const ShardLayout layout(count, ranks, 1);
    const auto want = owners_sum(f, layout, in);
    std::vector<float> rank_order(count);
    for (std::uint64_t i = 0; i < count; ++i)
      for (int r = 0; r < ranks; ++r) rank_order[i] += element(f, in[r], i);
    std::vector<std::byte> rank_order_bits(count * 2);
    narrow(f, rank_order.data(), rank_order_bits.data(), count);
    ASSERT_NE(rank_order_bits, want) << "the data does not tell the orders apart";
    std::vector<std::vector<std::byte>> out(ranks);
    on_every_rank(ranks, [&](int r) {
      out[r].resize(count * 2);
      ASSERT_TRUE(job.engines[r]->allreduce(in[r].data(), out[r].data(), count, f).ok());
    });
    for (int r = 0; r < ranks; ++r) EXPECT_EQ(out[r], want) << "rank " << r;
  }
}

struct Blocks {
  const char* what;
  std::vector<std::uint64_t> counts;
};

std::vector<Blocks> block_shapes(int ranks) {
  std::vector<Blocks> shapes;
  shapes.push_back({"equal", std::vector<std::uint64_t>(ranks, 1000)});
  std::vector<std::uint64_t> uneven(ranks);
  for (int r = 0; r < ranks; ++r) uneven[r] = 37 + 211 * static_cast<std::uint64_t>(r * r);
  shapes.push_back({"uneven", uneven});
  std::vector<std::uint64_t> zeros(ranks, 500);
  zeros[0] = 0;
  zeros[ranks - 1] = 0;
  shapes.push_back({"zeros (the first and last rank get nothing)", zeros});
  std::vector<std::uint64_t> one(ranks, 0);
  one[1] = 3001;
  shapes.push_back({"one rank gets everything", one});
  shapes.push_back({"all zero", std::vector<std::uint64_t>(ranks, 0)});
  return shapes;
}

TEST(FormatsEngine, ReduceScatterGivesEachRankItsBlockOfTheSum) {
  for (int ranks : {2, 3, 4}) {
    Job job = testing::start_inproc_job(ranks, options_of());
    for (const Blocks& blocks : block_shapes(ranks))
      for (ElementFormat f : kFormats)
        for (bool in_place : {false, true}) {
          const std::uint64_t total = std::accumulate(blocks.counts.begin(), blocks.counts.end(), std::uint64_t{0});
          SCOPED_TRACE(std::string(blocks.what) + ", " + named(f, ranks, total, in_place));
          const std::size_t eb = element_bytes(f);
          const ShardLayout layout(blocks.counts, 1);
          std::vector<std::vector<std::byte>> in(ranks), out(ranks);
          for (int r = 0; r < ranks; ++r) in[r] = input_of(f, r, 1, total);
          const auto want = owners_sum(f, layout, in);
          std::vector<CallStats> stats(ranks);
          on_every_rank(ranks, [&](int r) {
            // Not in place: the output is the block and a guard after it, which must stay as it was.
            out[r] = in_place ? in[r] : std::vector<std::byte>((blocks.counts[r] + 8) * eb, std::byte{0x5a});
            stats[r] = job.engines[r]->reduce_scatter(in_place ? out[r].data() : in[r].data(), out[r].data(), blocks.counts, f);
          });
          for (int r = 0; r < ranks; ++r) {
            ASSERT_TRUE(stats[r].ok()) << stats[r].status.text();
            EXPECT_EQ(stats[r].shape, (CallShape{Collective::reduce_scatter, f}));
            EXPECT_EQ(stats[r].entries, blocks.counts[r]);
            const std::size_t bytes = blocks.counts[r] * eb;
            ASSERT_EQ(std::memcmp(out[r].data(), want.data() + layout.shard_begin(r) * eb, bytes), 0) << "rank " << r;
            if (in_place) {
              // Past the block the buffer still holds this rank's input beyond it, as MPI leaves it.
              EXPECT_EQ(std::memcmp(out[r].data() + bytes, in[r].data() + bytes, in[r].size() - bytes), 0) << "rank " << r;
            } else {
              for (std::size_t b = bytes; b < out[r].size(); ++b) ASSERT_EQ(out[r][b], std::byte{0x5a}) << "rank " << r << " wrote past its block";
            }
          }
        }
  }
}

TEST(FormatsEngine, ReduceScatterTakesOneCountPerRank) {
  Job job = testing::start_inproc_job(2, options_of());
  std::vector<float> buffer(8);
  const std::vector<std::uint64_t> three{2, 2, 2};
  const CallStats stats = job.engines[0]->reduce_scatter(buffer.data(), buffer.data(), three, ElementFormat::float32);
  EXPECT_EQ(stats.status.code(), StatusCode::invalid);
  EXPECT_NE(stats.status.message().find("one count per rank"), std::string::npos) << stats.status.message();
}

// Past calibration, with chunks discarded on arrival (OPTIREDUCE_FAULT_DROP): a reduce-scatter's
// block is the sum of the contributions that came, never rescaled. With every contribution 1.0,
// an entry is exactly N where nothing was dropped and a count 1 ..< N where something was, and the
// dropped entries counted are those.
TEST(FormatsEngine, BoundedReduceScatterDropsWhatIsMissingAndCountsIt) {
  const int ranks = 4, calibration = 3, calls = 12;
  EngineOptions o = options_of(calibration);
  o.faults.drop = 0.05;
  o.faults.seed = 5;
  o.loss_budget = 1.0;  // never fall back to exact calls
  Job job = testing::start_inproc_job(ranks, o);
  const std::vector<std::uint64_t> counts{3000, 1000, 2000, 4000};
  const std::uint64_t total = 10000;
  for (ElementFormat f : {ElementFormat::float32, ElementFormat::bfloat16}) {
    SCOPED_TRACE(to_string(f));
    const std::size_t eb = element_bytes(f);
    std::vector<std::byte> ones(total * eb);
    const std::vector<float> one(total, 1.0f);
    if (f == ElementFormat::float32) std::memcpy(ones.data(), one.data(), ones.size());
    else narrow(f, one.data(), ones.data(), total);
    std::uint64_t dropped_after_calibration = 0;
    for (int c = 0; c < calls; ++c) {
      std::vector<std::vector<std::byte>> out(ranks);
      std::vector<CallStats> stats(ranks);
      on_every_rank(ranks, [&](int r) {
        out[r].resize(counts[r] * eb);
        stats[r] = job.engines[r]->reduce_scatter(ones.data(), out[r].data(), counts, f, true);
      });
      for (int r = 0; r < ranks; ++r) {
        ASSERT_TRUE(stats[r].ok()) << stats[r].status.text();
        EXPECT_EQ(stats[r].kind, c < calibration ? CallKind::calibration : CallKind::bounded) << "call " << c;
        std::uint64_t short_entries = 0;
        for (std::uint64_t i = 0; i < counts[r]; ++i) {
          const float v = element(f, out[r], i);
          ASSERT_TRUE(v == std::floor(v) && v >= 1 && v <= ranks) << "entry " << i << " is " << v << ": not a count of contributions";
          short_entries += v < ranks;
        }
        EXPECT_EQ(stats[r].dropped_entries, short_entries) << "call " << c << " rank " << r;
        if (c >= calibration) dropped_after_calibration += short_entries;
      }
    }
    EXPECT_GT(dropped_after_calibration, 0u) << "the injected loss never reached a bounded call";
  }
}

// Over a network that loses data (a datagram transport), every sixteenth message's first copy:
// the resends bring it back, so bounded 16-bit allreduces and reduce-scatters past calibration
// stay exact (bitwise, on every rank) wherever no phase ran to its deadline.
TEST(FormatsEngine, ResendsKeepBoundedSixteenBitCallsExact) {
  const int ranks = 4, calibration = 3, calls = 14;
  EngineOptions o = options_of(calibration);
  o.loss_budget = 1.0;
  auto loss = std::make_shared<testing::FirstCopyLoss>();
  testing::InProcNetwork network;
  network.traits.can_abandon_sends = true;  // as udp/ claims
  network.drop = [loss](int from, int to, std::span<const std::byte> header) { return (*loss)(from, to, header); };
  Job job = testing::start_inproc_job(ranks, o, &network);
  const std::vector<std::uint64_t> counts{1500, 500, 0, 2096};
  const std::uint64_t total = 4096;
  int exact_calls = 0, bounded_calls = 0;
  for (Collective op : {Collective::allreduce, Collective::reduce_scatter}) {
    for (int c = 0; c < calls; ++c) {
      const ElementFormat f = c % 2 ? ElementFormat::bfloat16 : ElementFormat::float16;
      const ShardLayout layout = op == Collective::allreduce ? ShardLayout(total, ranks, 1) : ShardLayout(counts, 1);
      std::vector<std::vector<std::byte>> in(ranks), out(ranks);
      for (int r = 0; r < ranks; ++r) in[r] = input_of(f, r, c, total);
      const auto want = owners_sum(f, layout, in);
      std::vector<CallStats> stats(ranks);
      on_every_rank(ranks, [&](int r) {
        out[r].resize(total * 2);
        stats[r] = op == Collective::allreduce ? job.engines[r]->allreduce(in[r].data(), out[r].data(), total, f, true)
                                               : job.engines[r]->reduce_scatter(in[r].data(), out[r].data(), counts, f, true);
      });
      bool expired = false;
      for (int r = 0; r < ranks; ++r) {
        ASSERT_TRUE(stats[r].ok()) << stats[r].status.text();
        expired = expired || stats[r].cut;
      }
      if (stats[0].kind != CallKind::bounded) continue;
      ++bounded_calls;
      if (expired) continue;
      ++exact_calls;
      for (int r = 0; r < ranks; ++r) {
        const std::size_t from = op == Collective::allreduce ? 0 : layout.shard_begin(r) * 2;
        const std::size_t bytes = op == Collective::allreduce ? total * 2 : counts[r] * 2;
        EXPECT_EQ(stats[r].dropped_entries, 0u);
        ASSERT_EQ(std::memcmp(out[r].data(), want.data() + from, bytes), 0) << to_string(op) << " call " << c << " rank " << r;
      }
    }
  }
  std::uint64_t resent = 0;
  for (auto& e : job.engines) resent += e->agreed().resent_chunks;
  EXPECT_GT(resent, 0u) << "nothing was lost and asked for again";
  EXPECT_GE(bounded_calls, 2 * (calls - 2 * calibration - 2));
  // A loaded host can still cut a phase (a descheduled rank outlasts a calibrated deadline), so
  // how many calls ran uncut is the machine's; the values of those that did are the engine's.
  EXPECT_GE(exact_calls, 2) << "too few calls without a cut phase to compare";
}

// A size class per shape: a float32 allreduce's calibration does not calibrate a bfloat16 one or a
// reduce-scatter of as many elements (each moves other bytes, or one phase).
TEST(FormatsEngine, EachShapeCalibratesItsOwnClass) {
  const int ranks = 2, calibration = 2;
  Job job = testing::start_inproc_job(ranks, options_of(calibration));
  const std::uint64_t count = 4096;
  const std::vector<std::uint64_t> counts{2048, 2048};
  std::vector<float> buffer(count * ranks, 1.0f);
  auto kinds = [&](auto&& call) {
    std::vector<CallKind> seen(ranks);
    on_every_rank(ranks, [&](int r) { seen[r] = call(r).kind; });
    EXPECT_EQ(seen[0], seen[1]);
    return seen[0];
  };
  auto allreduce = [&](ElementFormat f) {
    return kinds([&](int r) { return job.engines[r]->allreduce(buffer.data() + r * count, buffer.data() + r * count, count, f, true); });
  };
  auto reduce_scatter = [&] {
    return kinds([&](int r) { return job.engines[r]->reduce_scatter(buffer.data() + r * count, buffer.data() + r * count, counts, ElementFormat::float32, true); });
  };
  for (int c = 0; c < calibration; ++c) EXPECT_EQ(allreduce(ElementFormat::float32), CallKind::calibration);
  EXPECT_EQ(allreduce(ElementFormat::float32), CallKind::bounded);
  EXPECT_EQ(allreduce(ElementFormat::bfloat16), CallKind::calibration);
  EXPECT_EQ(reduce_scatter(), CallKind::calibration);
  EXPECT_EQ(allreduce(ElementFormat::bfloat16), CallKind::calibration);
  EXPECT_EQ(allreduce(ElementFormat::bfloat16), CallKind::bounded);
  EXPECT_EQ(reduce_scatter(), CallKind::calibration);
  EXPECT_EQ(reduce_scatter(), CallKind::bounded);
}

}  // namespace
}  // namespace optireduce
