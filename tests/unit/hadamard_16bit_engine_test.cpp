// The engine's 16-bit allreduces in the randomized Hadamard domain, over the in-process transport
// (ranks as threads, the real schedule, deadlines and fill agreement; loss injected on arrival as
// OPTIREDUCE_FAULT_DROP does). As docs/design.md decided ("Hadamard for 16-bit calls"), a shard is
// widened, encoded in float32 and rounded to travel; the owner sums the rounded contributions
// widened, in its order, and rounds once; the gathered shard is widened, decoded and rounded.
// What is checked, against a float64 reference and against that computation done here:
//  - past calibration with the transform on and nothing lost, every rank's result is exactly that
//    computation (with and without the worker thread), and the run's RMS error is within the
//    decided bound (2.5x the untransformed calls': three roundings instead of one);
//  - with loss, every call that agreed its fill is bitwise the same on every rank, a rank that
//    counted nothing dropped holds the lossless result, and the error is no larger than the
//    contributions the dropped entries could have held (the transform keeps norms);
//  - `auto` turns the transform on for 16-bit calls exactly when it does for float32 calls.
// Figures are printed for docs/design.md.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <functional>
#include <thread>

#include "half_vectors.hpp"
#include "inproc_transport.hpp"
#include "optireduce/elements/convert.hpp"
#include "optireduce/engine/engine/engine.hpp"
#include "optireduce/engine/tar/scatter_reduce.hpp"
#include "optireduce/hadamard/hadamard.hpp"

namespace optireduce {
namespace {

using Job = testing::InProcJob;
using testing::Half;
using testing::to_float;
using testing::to_half;

constexpr int kRanks = 4;
constexpr unsigned kBlockLog2 = 8;               // 256-element blocks: several per shard
constexpr std::uint64_t kCount = 4 * 2048 + 37;  // ragged: the last shard ends mid-block
constexpr int kCalibration = 3;                  // per format

EngineOptions options_of(HadamardMode mode, double drop, bool overlap) {
  EngineOptions o;
  o.chunk_elems = 64;  // 128 16-bit elements per chunk: 16 chunks per shard
  o.timeout = std::chrono::milliseconds(20000);
  o.calibration_calls = kCalibration;
  o.loss_budget = 1.0;  // never fall back to exact calls
  o.hadamard = mode;
  o.hadamard_block_log2 = kBlockLog2;
  o.hadamard_overlap = overlap;
  o.step_aside = false;
  o.faults.drop = drop;
  o.faults.seed = 11;
  return o;
}

ElementFormat format_of_call(int c) { return c % 2 ? ElementFormat::bfloat16 : ElementFormat::float16; }

// Rank `rank`'s float32 gradients for call `call`.
std::vector<float> gradients(int rank, int call) { return testing::gradient_like(static_cast<unsigned>(1000 * call + rank + 1), kCount); }

// What every rank sends of shard p: its input widened, encoded under the call's seed, rounded.
std::vector<std::vector<float>> sent(ElementFormat f, std::uint64_t seed, const ShardLayout& layout, int p,
                                     const std::vector<Half>& in) {
  HadamardOptions h;
  h.block_log2 = kBlockLog2;
  const std::uint64_t begin = layout.shard_begin(p), n = layout.shard_size(p);
  std::vector<std::vector<float>> out;
  std::vector<float> encoded(n);
  for (const Half& rank_input : in) {
    const auto x = to_float(f, Half(rank_input.begin() + begin, rank_input.begin() + begin + n));
    hadamard_encode(x.data(), encoded.data(), n, seed, h);
    out.push_back(to_float(f, to_half(f, encoded)));
  }
  return out;
}

// A lossless call as the engine computes it: per shard, the owner's sum of what was sent, widened,
// in its order, rounded once; that widened, decoded and rounded.
Half transformed_sum(ElementFormat f, std::uint64_t comm_id, std::uint64_t epoch, const std::vector<Half>& in) {
  const ShardLayout layout(kCount, kRanks, 1);
  HadamardOptions h;
  h.block_log2 = kBlockLog2;
  Half result(kCount);
  for (int p = 0; p < kRanks; ++p) {
    const std::uint64_t seed = hadamard_seed(comm_id, epoch, static_cast<std::uint64_t>(p)), n = layout.shard_size(p);
    const auto parts = sent(f, seed, layout, p, in);
    std::vector<float> sum(parts[p]);
    for (int place = 1; place < kRanks; ++place)
      for (std::uint64_t i = 0; i < n; ++i) sum[i] += parts[summation_source(p, kRanks, place)][i];
    const auto gathered = to_float(f, to_half(f, sum));
    std::vector<float> decoded(n);
    hadamard_decode(gathered.data(), decoded.data(), n, seed, h);
    const Half shard = to_half(f, decoded);
    std::copy(shard.begin(), shard.end(), result.begin() + static_cast<std::ptrdiff_t>(layout.shard_begin(p)));
  }
  return result;
}

// The untransformed call: the owner's widened sum in its order, rounded once.
Half direct_sum(ElementFormat f, const std::vector<Half>& in) {
  const ShardLayout layout(kCount, kRanks, 1);
  std::vector<float> sum(kCount);
  for (int p = 0; p < kRanks; ++p)
    for (std::uint64_t i = layout.shard_begin(p); i < layout.shard_begin(p) + layout.shard_size(p); ++i) {
      float s = to_float(f, {in[p][i]})[0];
      for (int place = 1; place < kRanks; ++place) s += to_float(f, {in[summation_source(p, kRanks, place)][i]})[0];
      sum[i] = s;
    }
  return to_half(f, sum);
}

std::vector<double> exact_sum(ElementFormat f, const std::vector<Half>& in) {
  std::vector<double> sum(kCount, 0.0);
  for (const Half& h : in) {
    const auto x = to_float(f, h);
    for (std::uint64_t i = 0; i < kCount; ++i) sum[i] += x[i];
  }
  return sum;
}

struct Error {
  double norm = 0, largest = 0;  // of result - exact: L2, and the largest entry
};
Error error_of(ElementFormat f, const Half& result, const std::vector<double>& exact) {
  const auto x = to_float(f, result);
  Error e;
  for (std::uint64_t i = 0; i < kCount; ++i) {
    const double d = static_cast<double>(x[i]) - exact[i];
    e.norm += d * d;
    e.largest = std::max(e.largest, std::fabs(d));
  }
  e.norm = std::sqrt(e.norm);
  return e;
}
double norm_of(const std::vector<double>& x) {
  double s = 0;
  for (double v : x) s += v * v;
  return std::sqrt(s);
}

// The most a call that dropped `dropped` entries can lose: in the transformed domain an entry that
// lacks data lacks at most every rank's contribution to it, and decoding keeps norms. The L2 norm
// of the `dropped` largest sums of |contribution| over ranks.
double loss_bound(ElementFormat f, std::uint64_t comm_id, std::uint64_t epoch, const std::vector<Half>& in, std::uint64_t dropped) {
  const ShardLayout layout(kCount, kRanks, 1);
  std::vector<double> reach;
  for (int p = 0; p < kRanks; ++p) {
    const auto parts = sent(f, hadamard_seed(comm_id, epoch, static_cast<std::uint64_t>(p)), layout, p, in);
    for (std::uint64_t i = 0; i < layout.shard_size(p); ++i) {
      double s = 0;
      for (const auto& part : parts) s += std::fabs(part[i]);
      reach.push_back(s * s);
    }
  }
  std::sort(reach.begin(), reach.end(), std::greater<>());
  double s = 0;
  for (std::uint64_t i = 0; i < dropped && i < reach.size(); ++i) s += reach[i];
  return std::sqrt(s);
}

struct Call {
  ElementFormat format;
  std::vector<Half> in, out;
  std::vector<CallStats> stats;
};

// Call `c` of format `f` on every rank at once (each rank its own thread). A float32 call's
// inputs and outputs are not kept (the `auto` test looks at its statistics only).
Call run_call(Job& job, int c, ElementFormat f) {
  Call call{f, {}, std::vector<Half>(kRanks, Half(kCount)), std::vector<CallStats>(kRanks)};
  std::vector<std::vector<float>> wide(kRanks);
  for (int r = 0; r < kRanks; ++r) {
    wide[r] = gradients(r, c);
    if (f != ElementFormat::float32) call.in.push_back(to_half(f, wide[r]));
  }
  std::vector<std::thread> threads;
  for (int r = 0; r < kRanks; ++r)
    threads.emplace_back([&, r] {
      call.stats[r] = f == ElementFormat::float32
                          ? job.engines[r]->allreduce_sum(wide[r].data(), wide[r].data(), kCount, true)
                          : job.engines[r]->allreduce(call.in[r].data(), call.out[r].data(), kCount, f, true);
    });
  for (auto& t : threads) t.join();
  for (int r = 0; r < kRanks; ++r) EXPECT_TRUE(call.stats[r].ok()) << "call " << c << " rank " << r << ": " << call.stats[r].status.text();
  return call;
}

std::string describe(const Call& call, int c, int r) {
  return std::string(to_string(call.format)) + " call " + std::to_string(c) + " rank " + std::to_string(r) + " (" +
         to_string(call.stats[r].kind) + ", " + std::to_string(call.stats[r].dropped_entries) + " dropped)";
}

TEST(Hadamard16Engine, CleanCallsAreTheTransformedSumOnEveryRank) {
  const int calls = 2 * kCalibration + 16;
  for (bool overlap : {false, true}) {
    Job job = testing::start_inproc_job(kRanks, options_of(HadamardMode::on, 0.0, overlap));
    // Per format, over the results compared: squared errors transformed and direct, squared norms.
    double transformed2[3] = {}, direct2[3] = {}, norm2[3] = {};
    int compared = 0;
    for (int c = 0; c < calls; ++c) {
      const Call call = run_call(job, c, format_of_call(c));
      ASSERT_FALSE(HasFailure());
      if (call.stats[0].kind != CallKind::bounded) continue;
      const ElementFormat f = call.format;
      const auto k = static_cast<std::size_t>(f);
      const Half want = transformed_sum(f, job.engines[0]->comm_id(), call.stats[0].sequence, call.in);
      const auto exact = exact_sum(f, call.in);
      const double direct = error_of(f, direct_sum(f, call.in), exact).norm;
      for (int r = 0; r < kRanks; ++r) {
        ASSERT_TRUE(call.stats[r].transformed) << describe(call, c, r);
        if (call.stats[r].dropped_entries) continue;  // late on a busy host
        ASSERT_EQ(call.out[r], want) << describe(call, c, r) << (overlap ? " (worker)" : "") << ": not the transformed sum";
        const double transformed = error_of(f, call.out[r], exact).norm;
        // One call's rounding errors are a few heavy entries' (below, the run's are held to the bound).
        EXPECT_LE(transformed, 4 * direct) << describe(call, c, r);
        transformed2[k] += transformed * transformed;
        direct2[k] += direct * direct;
        norm2[k] += norm_of(exact) * norm_of(exact);
        ++compared;
      }
    }
    for (ElementFormat f : {ElementFormat::float16, ElementFormat::bfloat16}) {
      const auto k = static_cast<std::size_t>(f);
      if (norm2[k] == 0) continue;
      std::printf("%s, clean%s: relative RMS error %.3g transformed, %.3g direct (%.2fx)\n", to_string(f),
                  overlap ? " (worker)" : "", std::sqrt(transformed2[k] / norm2[k]), std::sqrt(direct2[k] / norm2[k]),
                  std::sqrt(transformed2[k] / direct2[k]));
      EXPECT_LE(transformed2[k], 2.5 * 2.5 * direct2[k]) << to_string(f) << ": over the decided bound";
    }
    // A loaded host can cut a call; a quarter of the results must be clean to say anything.
    EXPECT_GT(compared, (calls - 2 * kCalibration) * kRanks / 4) << "too few calls without loss to compare";
  }
}

// 1 % of the chunks discarded on arrival, with the transform on and (for the figures) off.
TEST(Hadamard16Engine, LossyCallsStayIdenticalAndLoseNoMoreThanWasDropped) {
  const int calls = 2 * kCalibration + 30;
  for (HadamardMode mode : {HadamardMode::on, HadamardMode::off}) {
    Job job = testing::start_inproc_job(kRanks, options_of(mode, 0.01, true));
    std::uint64_t dropped = 0, entries = 0;
    double error2 = 0, norm2 = 0;  // over the lossy results: squared errors, squared norms
    std::vector<double> largests;  // per lossy result: its largest error
    int lossy_results = 0, agreed_calls = 0;
    for (int c = 0; c < calls; ++c) {
      const Call call = run_call(job, c, format_of_call(c));
      ASSERT_FALSE(HasFailure());
      if (call.stats[0].kind != CallKind::bounded) continue;
      const ElementFormat f = call.format;
      const std::uint64_t epoch = call.stats[0].sequence;
      const auto exact = exact_sum(f, call.in);
      const Half clean = mode == HadamardMode::on ? transformed_sum(f, job.engines[0]->comm_id(), epoch, call.in) : direct_sum(f, call.in);
      const double clean_error = error_of(f, clean, exact).norm;
      bool all_agreed = true;
      for (int r = 0; r < kRanks; ++r) {
        const CallStats& s = call.stats[r];
        ASSERT_EQ(s.transformed, mode == HadamardMode::on) << describe(call, c, r);
        all_agreed = all_agreed && s.fill_agreed;
        if (s.dropped_entries == 0) {
          EXPECT_EQ(call.out[r], clean) << describe(call, c, r) << ": nothing counted as dropped, yet not the lossless result";
          continue;
        }
        dropped += s.dropped_entries;
        entries += kCount;
        const Error e = error_of(f, call.out[r], exact);
        if (mode == HadamardMode::on) {
          EXPECT_LE(e.norm, loss_bound(f, job.engines[0]->comm_id(), epoch, call.in, s.dropped_entries) + 2 * clean_error + 1e-6)
              << describe(call, c, r) << ": more lost than the dropped entries held";
        }
        largests.push_back(e.largest);
        error2 += e.norm * e.norm;
        norm2 += norm_of(exact) * norm_of(exact);
        ++lossy_results;
      }
      if (!all_agreed) continue;
      ++agreed_calls;
      for (int r = 1; r < kRanks; ++r) {
        EXPECT_EQ(call.out[r], call.out[0]) << describe(call, c, r) << ": replicas differ although every rank agreed the fill";
        EXPECT_EQ(call.stats[r].dropped_entries, call.stats[0].dropped_entries) << describe(call, c, r);
      }
    }
    std::sort(largests.begin(), largests.end());
    std::printf("hadamard %s, 1%% of chunks dropped on arrival: %d lossy results, %.2f%% of their entries dropped, "
                "relative RMS error %.3g, largest error: median %.3g, worst %.3g\n",
                mode == HadamardMode::on ? "on" : "off", lossy_results, entries ? 100.0 * double(dropped) / double(entries) : 0.0,
                norm2 > 0 ? std::sqrt(error2 / norm2) : 0.0, largests.empty() ? 0.0 : largests[largests.size() / 2],
                largests.empty() ? 0.0 : largests.back());
    EXPECT_GT(dropped, 0u) << "the injected loss never reached a bounded call";
    EXPECT_GT(agreed_calls, (calls - 2 * kCalibration) / 4) << "too few calls whose ranks agreed the fill";
  }
}

// `auto`: the transform runs while the communicator's last agreed window lost data, decided at
// the same call on every rank for the whole communicator, whatever each call's format. With a
// window of 2 bounded calls and formats in turn (float32, bf16, fp16), two windows in three hold
// a float32 call and a 16-bit one: within a window all are transformed or none is; the first
// decision (the first window's losses, agreed at the end of the second) applies from the third.
TEST(Hadamard16Engine, AutoTransformsSixteenBitCallsWhenItTransformsFloat32Calls) {
  EngineOptions o = options_of(HadamardMode::automatic, 0.05, false);
  o.sync_interval = 2;
  Job job = testing::start_inproc_job(kRanks, o);
  constexpr ElementFormat kTurn[] = {ElementFormat::float32, ElementFormat::bfloat16, ElementFormat::float16};
  std::vector<std::vector<int>> windows;  // per window of bounded calls: each call's transform
  std::vector<std::vector<ElementFormat>> formats;
  int bounded = 0;
  for (int c = 0; c < 3 * kCalibration + 24; ++c) {
    const Call call = run_call(job, c, kTurn[c % 3]);
    ASSERT_FALSE(HasFailure());
    if (call.stats[0].kind != CallKind::bounded) continue;
    for (int r = 1; r < kRanks; ++r) ASSERT_EQ(call.stats[r].transformed, call.stats[0].transformed) << describe(call, c, r);
    if (bounded++ % 2 == 0) windows.emplace_back(), formats.emplace_back();
    windows.back().push_back(call.stats[0].transformed ? 1 : 0);
    formats.back().push_back(call.format);
  }
  bool sixteen_transformed = false, float32_transformed = false;
  for (std::size_t w = 0; w < windows.size(); ++w) {
    for (std::size_t k = 0; k < windows[w].size(); ++k) {
      EXPECT_EQ(windows[w][k], windows[w][0]) << "window " << w << ": its " << to_string(formats[w][k]) << " call decided otherwise";
      if (w < 2) {
        EXPECT_EQ(windows[w][k], 0) << "window " << w << ": transformed before any loss was agreed";
      }
      (formats[w][k] == ElementFormat::float32 ? float32_transformed : sixteen_transformed) |= windows[w][k] != 0;
    }
  }
  EXPECT_TRUE(float32_transformed) << "5 % loss never turned the transform on";
  EXPECT_TRUE(sixteen_transformed) << "the transform never ran for a 16-bit call";
}

}  // namespace
}  // namespace optireduce
