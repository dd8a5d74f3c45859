#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <random>
#include <vector>

#include "optireduce/hadamard/hadamard.hpp"

namespace optireduce {
namespace {

std::vector<float> random_vector(std::uint64_t n, unsigned seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> g(0.0f, 1.0f);
  std::vector<float> v(n);
  for (auto& x : v) x = g(rng);
  return v;
}

double norm(const std::vector<float>& v) {
  double s = 0;
  for (float x : v) s += double(x) * x;
  return std::sqrt(s);
}

const std::uint64_t kLengths[] = {0, 1, 2, 3, 7, 1000, 4096, 4097, 3 * 4096 + 5, 40 * 4096 + 4095};

TEST(Hadamard, RoundTripAndNormForAnyLength) {
  HadamardOptions o;
  for (std::uint64_t n : kLengths) {
    auto x = random_vector(n, 1);
    std::vector<float> enc(n), dec(n);
    const auto seed = hadamard_seed(42, 7, 0);
    hadamard_encode(x.data(), enc.data(), n, seed, o);
    hadamard_decode(enc.data(), dec.data(), n, seed, o);
    const double nx = norm(x);
    EXPECT_NEAR(norm(enc), nx, 1e-5 * nx + 1e-12) << "n=" << n;
    double err = 0;
    for (std::uint64_t i = 0; i < n; ++i) err = std::max(err, double(std::abs(dec[i] - x[i])));
    EXPECT_LE(err, 1e-6 * (nx / std::sqrt(double(std::max<std::uint64_t>(n, 1)))) * 10 + 1e-7) << "n=" << n;
  }
}

TEST(Hadamard, EveryRankDerivesTheSameSignsAndCallsDiffer) {
  HadamardOptions o;
  const std::uint64_t n = 5 * 4096 + 3;
  auto x = random_vector(n, 2);
  std::vector<float> a(n), b(n), c(n);
  hadamard_encode(x.data(), a.data(), n, hadamard_seed(9, 100, 1), o);
  hadamard_encode(x.data(), b.data(), n, hadamard_seed(9, 100, 1), o);
  hadamard_encode(x.data(), c.data(), n, hadamard_seed(9, 101, 1), o);
  EXPECT_EQ(a, b);
  EXPECT_NE(a, c);
  EXPECT_NE(hadamard_seed(9, 100, 1), hadamard_seed(10, 100, 1));
  EXPECT_NE(hadamard_seed(9, 100, 1), hadamard_seed(9, 100, 2));
}

TEST(Hadamard, TransformOfASumIsTheSumOfTransforms) {
  HadamardOptions o;
  const std::uint64_t n = 8 * 4096 + 777;
  auto x = random_vector(n, 3), y = random_vector(n, 4);
  std::vector<float> s(n), tx(n), ty(n), ts(n);
  for (std::uint64_t i = 0; i < n; ++i) s[i] = x[i] + y[i];
  const auto seed = hadamard_seed(1, 2, 3);
  hadamard_encode(x.data(), tx.data(), n, seed, o);
  hadamard_encode(y.data(), ty.data(), n, seed, o);
  hadamard_encode(s.data(), ts.data(), n, seed, o);
  for (std::uint64_t i = 0; i < n; ++i) ASSERT_NEAR(ts[i], tx[i] + ty[i], 1e-5) << i;
}

TEST(Hadamard, SimdPathsEqualTheScalarReference) {
  const std::uint64_t n = 33 * 4096 + 1234;
  auto x = random_vector(n, 5);
  const auto seed = hadamard_seed(5, 6, 7);
  HadamardOptions scalar;
  scalar.simd = SimdLevel::scalar;
  std::vector<float> ref(n), ref_dec(n);
  hadamard_encode(x.data(), ref.data(), n, seed, scalar);
  hadamard_decode(ref.data(), ref_dec.data(), n, seed, scalar);
  for (SimdLevel level : {SimdLevel::avx2, SimdLevel::avx512}) {
    HadamardOptions o;
    o.simd = level;
    std::vector<float> enc(n), dec(n);
    hadamard_encode(x.data(), enc.data(), n, seed, o);
    hadamard_decode(ref.data(), dec.data(), n, seed, o);
    for (std::uint64_t i = 0; i < n; ++i) {
      ASSERT_NEAR(enc[i], ref[i], 1e-5) << to_string(level) << " encode " << i;
      ASSERT_NEAR(dec[i], ref_dec[i], 1e-5) << to_string(level) << " decode " << i;
    }
  }
}

// Every block size, with block counts that leave wide tiles, single sub-tiles and a partial one,
// and a ragged tail: each SIMD level matches the reference both ways, and round-trips.
TEST(Hadamard, EveryBlockSizeAndRaggedLengthMatchesTheReference) {
  for (unsigned log2 = 1; log2 <= 16; ++log2) {
    const std::uint64_t B = std::uint64_t{1} << log2;
    const std::uint64_t blocks = log2 <= 12 ? 149 : 37;
    const std::uint64_t n = blocks * B + (B > 1 ? B - 1 - B / 4 : 0);
    auto x = random_vector(n, 10 + log2);
    const auto seed = hadamard_seed(3, log2, 1);
    HadamardOptions scalar;
    scalar.block_log2 = log2;
    scalar.simd = SimdLevel::scalar;
    std::vector<float> ref(n), ref_dec(n);
    hadamard_encode(x.data(), ref.data(), n, seed, scalar);
    hadamard_decode(ref.data(), ref_dec.data(), n, seed, scalar);
    for (SimdLevel level : {SimdLevel::avx2, SimdLevel::avx512}) {
      HadamardOptions o = scalar;
      o.simd = level;
      std::vector<float> enc(n), dec(n), back(n);
      hadamard_encode(x.data(), enc.data(), n, seed, o);
      hadamard_decode(ref.data(), dec.data(), n, seed, o);
      hadamard_decode(enc.data(), back.data(), n, seed, o);
      for (std::uint64_t i = 0; i < n; ++i) {
        ASSERT_NEAR(enc[i], ref[i], 1e-5) << to_string(level) << " encode, block 2^" << log2 << ", index " << i;
        ASSERT_NEAR(dec[i], ref_dec[i], 1e-5) << to_string(level) << " decode, block 2^" << log2 << ", index " << i;
        ASSERT_NEAR(back[i], x[i], 1e-5) << to_string(level) << " round trip, block 2^" << log2 << ", index " << i;
      }
    }
  }
}

// Large aligned outputs take the non-temporal stores; they must give the same numbers.
TEST(Hadamard, LargeAlignedOutputsMatchTheReference) {
  const std::uint64_t B = 4096, n = 640 * B + 100;  // over 8 MiB
  auto x = random_vector(n, 21);
  auto aligned = [](std::vector<float>& v) {
    const auto misalignment = reinterpret_cast<std::uintptr_t>(v.data()) % 64;
    return v.data() + (misalignment ? (64 - misalignment) / sizeof(float) : 0);
  };
  const auto seed = hadamard_seed(8, 9, 10);
  HadamardOptions scalar;
  scalar.simd = SimdLevel::scalar;
  std::vector<float> ref(n), ref_dec(n), enc_buffer(n + 16), dec_buffer(n + 16);
  hadamard_encode(x.data(), ref.data(), n, seed, scalar);
  hadamard_decode(ref.data(), ref_dec.data(), n, seed, scalar);
  float* enc = aligned(enc_buffer);
  float* dec = aligned(dec_buffer);
  hadamard_encode(x.data(), enc, n, seed, HadamardOptions{});
  hadamard_decode(ref.data(), dec, n, seed, HadamardOptions{});
  for (std::uint64_t i = 0; i < n; ++i) {
    ASSERT_NEAR(enc[i], ref[i], 1e-5) << "encode " << i;
    ASSERT_NEAR(dec[i], ref_dec[i], 1e-5) << "decode " << i;
  }
}

TEST(Hadamard, ALostChunkBecomesSmallNoiseOverManyBlocks) {
  // Heavy-tailed data, as real gradients are: a few large entries among many small ones.
  const std::uint64_t n = 64 * 4096;
  std::mt19937 rng(6);
  std::normal_distribution<float> g(0.0f, 0.01f);
  std::uniform_real_distribution<float> u(0.0f, 1.0f);
  std::vector<float> x(n);
  for (auto& v : x) v = u(rng) < 0.001f ? 10.0f * (u(rng) - 0.5f) : g(rng);
  HadamardOptions o;
  const auto seed = hadamard_seed(1, 1, 0);
  std::vector<float> enc(n), dec(n);
  hadamard_encode(x.data(), enc.data(), n, seed, o);
  // Lose 5 % of the encoded range as 8 contiguous chunks, and the same chunks of the raw data.
  std::vector<float> raw_lost = x;
  const std::uint64_t chunk = n / 160;
  for (int c = 0; c < 8; ++c) {
    const std::uint64_t start = static_cast<std::uint64_t>(c) * 20 * chunk + 3 * chunk;
    std::fill(enc.begin() + start, enc.begin() + start + chunk, 0.0f);
    std::fill(raw_lost.begin() + start, raw_lost.begin() + start + chunk, 0.0f);
  }
  hadamard_decode(enc.data(), dec.data(), n, seed, o);
  double max_with = 0, max_without = 0, sq_with = 0, sq_without = 0;
  for (std::uint64_t i = 0; i < n; ++i) {
    const double e_with = std::abs(dec[i] - x[i]), e_without = std::abs(raw_lost[i] - x[i]);
    max_with = std::max(max_with, e_with);
    max_without = std::max(max_without, e_without);
    sq_with += e_with * e_with;
    sq_without += e_without * e_without;
  }
  // The figures of the closing note: the same loss, with and without the transform.
  std::printf("5%% of chunks lost: max error %.4g without, %.4g with the transform; RMS %.4g without, %.4g with\n",
              max_without, max_with, std::sqrt(sq_without / double(n)), std::sqrt(sq_with / double(n)));
  EXPECT_GT(max_without, 3 * max_with) << "max error without " << max_without << ", with " << max_with;
}

}  // namespace
}  // namespace optireduce
