// The measurement behind the Hadamard decision for 16-bit calls (docs/design.md, "Element formats
// and reduce-scatter"): 4 ranks' heavy-tailed gradient-like contributions in bf16 or fp16, summed
// as the engine sums them (widened, float32 in rank order, rounded once), with 1 % of the
// (rank, chunk) contributions lost, against the same call run through the randomized Hadamard
// transform in float32 before rounding to the wire format (each rank widens, encodes and rounds;
// the owner widens, sums and rounds; every rank widens, decodes and rounds). Errors against the
// float64 sum of every contribution; the figures are printed for the design note, and the test
// holds the two facts the decision rests on: the transform costs accuracy where nothing is lost,
// and it spreads what a loss removes.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <random>
#include <set>
#include <utility>
#include <vector>

#include "half_vectors.hpp"
#include "optireduce/elements/convert.hpp"
#include "optireduce/hadamard/hadamard.hpp"

namespace optireduce {
namespace {

constexpr int kRanks = 4;
constexpr std::uint64_t kN = 64 * 4096, kChunk = 1024;  // a 2 KiB chunk of 16-bit elements

using testing::Half;
using testing::to_float;
using testing::to_half;

// Rank r's gradients, in the call's format.
Half contribution(ElementFormat f, int rank) { return to_half(f, testing::gradient_like(100 + static_cast<unsigned>(rank), kN)); }

// The owner's sum of what arrived: float32 in rank order, a lost (rank, chunk) left out.
std::vector<float> owner_sum(const std::vector<std::vector<float>>& parts, const std::set<std::pair<int, std::uint64_t>>& lost) {
  std::vector<float> s(kN, 0.0f);
  for (int r = 0; r < kRanks; ++r)
    for (std::uint64_t i = 0; i < kN; ++i)
      if (!lost.count({r, i / kChunk})) s[i] += parts[static_cast<std::size_t>(r)][i];
  return s;
}

struct Error {
  double rms = 0, max = 0;  // relative to the exact sum's RMS, and absolute
};
Error error(const std::vector<float>& got, const std::vector<double>& exact) {
  double e2 = 0, x2 = 0, mx = 0;
  for (std::uint64_t i = 0; i < kN; ++i) {
    const double d = static_cast<double>(got[i]) - exact[i];
    e2 += d * d;
    x2 += exact[i] * exact[i];
    mx = std::max(mx, std::fabs(d));
  }
  return {std::sqrt(e2 / x2), mx};
}

struct Figures {
  Error direct, transformed;
};

Figures measure(ElementFormat f, double loss) {
  std::vector<Half> in;
  std::vector<std::vector<float>> wide;
  std::vector<double> exact(kN, 0.0);
  for (int r = 0; r < kRanks; ++r) {
    in.push_back(contribution(f, r));
    wide.push_back(to_float(f, in.back()));
    for (std::uint64_t i = 0; i < kN; ++i) exact[i] += wide.back()[i];
  }
  std::set<std::pair<int, std::uint64_t>> lost;
  std::mt19937 rng(7);
  const auto chunks = kN / kChunk;
  const auto want = static_cast<std::size_t>(std::llround(loss * kRanks * static_cast<double>(chunks)));
  while (lost.size() < want) lost.insert({static_cast<int>(rng() % kRanks), rng() % chunks});

  Figures out;
  out.direct = error(to_float(f, to_half(f, owner_sum(wide, lost))), exact);

  const HadamardOptions o;
  const auto seed = hadamard_seed(1, 1, 0);
  std::vector<std::vector<float>> sent;
  std::vector<float> encoded(kN), decoded(kN);
  for (int r = 0; r < kRanks; ++r) {
    hadamard_encode(wide[static_cast<std::size_t>(r)].data(), encoded.data(), kN, seed, o);
    sent.push_back(to_float(f, to_half(f, encoded)));  // what crosses the network: 16 bits
  }
  const auto gathered = to_float(f, to_half(f, owner_sum(sent, lost)));  // the all-gather's 16 bits
  hadamard_decode(gathered.data(), decoded.data(), kN, seed, o);
  out.transformed = error(to_float(f, to_half(f, decoded)), exact);
  return out;
}

TEST(Hadamard16, CostsAccuracyWhenCleanAndSpreadsALoss) {
  for (auto f : {ElementFormat::bfloat16, ElementFormat::float16}) {
    const Figures clean = measure(f, 0.0), lossy = measure(f, 0.01);
    std::printf("%s: clean: relative RMS %.3g direct, %.3g transformed; max %.3g direct, %.3g transformed\n",
                to_string(f), clean.direct.rms, clean.transformed.rms, clean.direct.max, clean.transformed.max);
    std::printf("%s: 1%% lost: relative RMS %.3g direct, %.3g transformed; max %.3g direct, %.3g transformed\n",
                to_string(f), lossy.direct.rms, lossy.transformed.rms, lossy.direct.max, lossy.transformed.max);
    EXPECT_GT(clean.transformed.rms, 1.3 * clean.direct.rms) << to_string(f);
    EXPECT_LT(lossy.transformed.max, lossy.direct.max / 3) << to_string(f);
  }
}

}  // namespace
}  // namespace optireduce
