// The element formats' conversions and widened sums: every level against the scalar reference,
// the reference against independent oracles (the compiler's _Float16, and exact rounding in
// double), every 16-bit pattern, NaN, infinities, subnormals, ties.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "optireduce/elements/convert.hpp"

namespace optireduce {
namespace {

constexpr ConvertLevel kLevels[] = {ConvertLevel::scalar, ConvertLevel::f16c, ConvertLevel::avx512};
constexpr ElementFormat kHalfFormats[] = {ElementFormat::float16, ElementFormat::bfloat16};

std::vector<std::uint16_t> every_pattern() {
  std::vector<std::uint16_t> all(1u << 16);
  for (std::uint32_t p = 0; p < all.size(); ++p) all[p] = static_cast<std::uint16_t>(p);
  return all;
}

bool is_nan(ElementFormat f, std::uint16_t p) {
  return f == ElementFormat::float16 ? (p & 0x7C00) == 0x7C00 && (p & 0x3FF) : (p & 0x7F80) == 0x7F80 && (p & 0x7F);
}
std::uint16_t quiet_bit(ElementFormat f) { return f == ElementFormat::float16 ? 0x0200 : 0x0040; }

std::vector<float> widened(ElementFormat f, const std::vector<std::uint16_t>& in, ConvertLevel level) {
  std::vector<float> out(in.size());
  widen(f, in.data(), out.data(), in.size(), level);
  return out;
}
std::vector<std::uint16_t> narrowed(ElementFormat f, const std::vector<float>& in, ConvertLevel level) {
  std::vector<std::uint16_t> out(in.size());
  narrow(f, in.data(), out.data(), in.size(), level);
  return out;
}
std::uint16_t narrow_one(ElementFormat f, float v) { return narrowed(f, {v}, ConvertLevel::scalar)[0]; }
float widen_one(ElementFormat f, std::uint16_t p) { return widened(f, {p}, ConvertLevel::scalar)[0]; }

TEST(Elements, EveryPatternRoundTripsAtEveryLevel) {
  const auto all = every_pattern();
  for (ElementFormat f : kHalfFormats) {
    const auto reference = widened(f, all, ConvertLevel::scalar);
    for (ConvertLevel level : kLevels) {
      const auto wide = widened(f, all, level);
      ASSERT_EQ(std::memcmp(wide.data(), reference.data(), wide.size() * sizeof(float)), 0) << to_string(f) << " " << to_string(level);
      const auto back = narrowed(f, wide, level);
      for (std::uint32_t p = 0; p < all.size(); ++p) {
        // A NaN stays a NaN of the same sign and payload, quieted; everything else is exact.
        const std::uint16_t want = is_nan(f, all[p]) ? static_cast<std::uint16_t>(all[p] | quiet_bit(f)) : all[p];
        ASSERT_EQ(back[p], want) << to_string(f) << " " << to_string(level) << " pattern " << std::hex << p;
      }
    }
  }
}

TEST(Elements, HalfValuesAreIeee) {
  const auto f = ElementFormat::float16;
  EXPECT_EQ(widen_one(f, 0x3C00), 1.0f);
  EXPECT_EQ(widen_one(f, 0xC000), -2.0f);
  EXPECT_EQ(widen_one(f, 0x7BFF), 65504.0f);
  EXPECT_EQ(widen_one(f, 0x0001), std::ldexp(1.0f, -24));  // smallest subnormal
  EXPECT_EQ(widen_one(f, 0x03FF), std::ldexp(1023.0f, -24));  // largest subnormal
  EXPECT_EQ(widen_one(f, 0x0400), std::ldexp(1.0f, -14));  // smallest normal
  EXPECT_EQ(widen_one(f, 0x7C00), INFINITY);
  EXPECT_EQ(widen_one(f, 0xFC00), -INFINITY);
  EXPECT_TRUE(std::signbit(widen_one(f, 0x8000)) && widen_one(f, 0x8000) == 0.0f);
  EXPECT_TRUE(std::isnan(widen_one(f, 0x7E00)));
  EXPECT_TRUE(std::isnan(widen_one(f, 0x7C01)));  // signalling: a NaN still
}

TEST(Elements, BfloatValuesAreTheTopHalfOfFloat32) {
  const auto f = ElementFormat::bfloat16;
  EXPECT_EQ(widen_one(f, 0x3F80), 1.0f);
  EXPECT_EQ(widen_one(f, 0xC040), -3.0f);
  EXPECT_EQ(widen_one(f, 0x0001), std::bit_cast<float>(0x00010000u));  // a float32 subnormal
  EXPECT_EQ(widen_one(f, 0x7F80), INFINITY);
  EXPECT_TRUE(std::isnan(widen_one(f, 0x7FC0)));
}

TEST(Elements, RoundingTiesGoToEven) {
  const auto h = ElementFormat::float16;
  EXPECT_EQ(narrow_one(h, 1.0f + std::ldexp(1.0f, -11)), 0x3C00);      // halfway 1 and 1+2^-10: even is 1
  EXPECT_EQ(narrow_one(h, 1.0f + 3 * std::ldexp(1.0f, -11)), 0x3C02);  // halfway 1+2^-10 and 1+2^-9: even is up
  EXPECT_EQ(narrow_one(h, std::nextafter(1.0f + std::ldexp(1.0f, -11), 2.0f)), 0x3C01);  // past halfway: up
  EXPECT_EQ(narrow_one(h, 65519.0f), 0x7BFF);  // below halfway to 65536: the largest finite
  EXPECT_EQ(narrow_one(h, 65520.0f), 0x7C00);  // halfway: even is infinity
  EXPECT_EQ(narrow_one(h, -1e30f), 0xFC00);
  const auto b = ElementFormat::bfloat16;
  EXPECT_EQ(narrow_one(b, 1.0f + std::ldexp(1.0f, -8)), 0x3F80);
  EXPECT_EQ(narrow_one(b, 1.0f + 3 * std::ldexp(1.0f, -8)), 0x3F82);
  EXPECT_EQ(narrow_one(b, std::numeric_limits<float>::max()), 0x7F80);  // beyond the largest bfloat16 + half an ulp
  EXPECT_EQ(narrow_one(b, -INFINITY), 0xFF80);
}

TEST(Elements, SubnormalsAreKeptAndRounded) {
  const auto h = ElementFormat::float16;
  const float unit = std::ldexp(1.0f, -24);
  EXPECT_EQ(narrow_one(h, unit / 2), 0x0000);                          // halfway to the smallest: even is zero
  EXPECT_EQ(narrow_one(h, -unit / 2), 0x8000);
  EXPECT_EQ(narrow_one(h, std::nextafter(unit / 2, 1.0f)), 0x0001);
  EXPECT_EQ(narrow_one(h, 1.5f * unit), 0x0002);                       // halfway 1 and 2 units: even is 2
  EXPECT_EQ(narrow_one(h, 2.5f * unit), 0x0002);
  EXPECT_EQ(narrow_one(h, 1023.5f * unit), 0x0400);                    // rounds up to the smallest normal
  EXPECT_EQ(narrow_one(h, std::bit_cast<float>(0x00000001u)), 0x0000);  // a float32 subnormal
  const auto b = ElementFormat::bfloat16;
  EXPECT_EQ(narrow_one(b, std::bit_cast<float>(0x00018000u)), 0x0002);  // tie between bfloat16 subnormals: even
  EXPECT_EQ(narrow_one(b, std::bit_cast<float>(0x00008001u)), 0x0001);
}

TEST(Elements, NarrowingMatchesIndependentOraclesAtEveryLevel) {
  // Random float32 bit patterns (every class: NaN, infinities, subnormals, both signs) and values
  // near the 16-bit formats' ranges.
  std::mt19937 rng(7);
  std::vector<float> in(1 << 20);
  for (std::size_t i = 0; i < in.size(); ++i) {
    if (i % 2) in[i] = std::bit_cast<float>(static_cast<std::uint32_t>(rng()));
    else in[i] = std::ldexp(std::uniform_real_distribution<float>(-1, 1)(rng), static_cast<int>(rng() % 48) - 30);
  }
  for (ElementFormat f : kHalfFormats) {
    const auto reference = narrowed(f, in, ConvertLevel::scalar);
    for (ConvertLevel level : kLevels)
      ASSERT_EQ(narrowed(f, in, level), reference) << to_string(f) << " " << to_string(level);
    for (std::size_t i = 0; i < in.size(); ++i) {
      if (std::isnan(in[i])) {
        ASSERT_TRUE(is_nan(f, reference[i]));
        continue;
      }
      if (f == ElementFormat::float16) {
        const _Float16 oracle = static_cast<_Float16>(in[i]);  // the compiler's conversion (libgcc)
        ASSERT_EQ(reference[i], std::bit_cast<std::uint16_t>(oracle)) << in[i];
        continue;
      }
      // bfloat16: the nearest of the two bfloat16 values around it, in double; ties to the even.
      const std::uint32_t u = std::bit_cast<std::uint32_t>(in[i]);
      const std::uint16_t down = static_cast<std::uint16_t>(u >> 16), up = static_cast<std::uint16_t>(down + 1);
      const double x = in[i], lo = widen_one(f, down), hi = widen_one(f, up);
      const double dlo = std::fabs(x - lo), dhi = std::isinf(hi) ? std::fabs(x - std::ldexp(std::copysign(1.0, x), 128)) : std::fabs(x - hi);
      const std::uint16_t want = dlo < dhi ? down : dhi < dlo ? up : (down & 1 ? up : down);
      ASSERT_EQ(reference[i], want) << std::hex << u;
    }
  }
}

// The reference of the widened sum: float32 in the order given, rounded once.
std::vector<std::uint16_t> widened_sum_reference(ElementFormat f, const std::vector<std::vector<std::uint16_t>>& in) {
  std::vector<float> acc = widened(f, in[0], ConvertLevel::scalar);
  for (std::size_t k = 1; k < in.size(); ++k) {
    const auto w = widened(f, in[k], ConvertLevel::scalar);
    for (std::size_t i = 0; i < acc.size(); ++i) acc[i] += w[i];
  }
  return narrowed(f, acc, ConvertLevel::scalar);
}

TEST(Elements, WidenedSumRoundsOnceAtEveryLevel) {
  std::mt19937 rng(11);
  const std::size_t n = 3000;  // several blocks and a ragged tail
  for (ElementFormat f : kHalfFormats) {
    std::vector<std::vector<std::uint16_t>> in(5, std::vector<std::uint16_t>(n));
    for (auto& v : in)
      for (auto& x : v) x = narrow_one(f, std::uniform_real_distribution<float>(-4, 4)(rng));
    const auto want = widened_sum_reference(f, in);
    for (ConvertLevel level : kLevels) {
      // In one pass from the 16-bit sources.
      std::vector<const void*> sources;
      for (auto& v : in) sources.push_back(v.data());
      std::vector<std::uint16_t> out(n), also(n);
      sum_widened({f, nullptr, sources.data(), 5, nullptr, out.data(), also.data()}, n, level);
      ASSERT_EQ(out, want) << to_string(level);
      ASSERT_EQ(also, want);
      // In three passes through a float32 running sum, with a source at an odd address and the
      // last pass writing over one of its sources.
      std::vector<std::byte> odd(2 * n + 1);
      std::memcpy(odd.data() + 1, in[1].data(), 2 * n);
      std::vector<float> running(n);
      const void* first[] = {in[0].data(), odd.data() + 1};
      sum_widened({f, nullptr, first, 2, running.data(), nullptr, nullptr}, n, level);
      const void* second[] = {in[2].data()};
      sum_widened({f, running.data(), second, 1, running.data(), nullptr, nullptr}, n, level);
      std::vector<std::uint16_t> last = in[4];
      const void* third[] = {in[3].data(), last.data()};
      sum_widened({f, running.data(), third, 2, nullptr, last.data(), nullptr}, n, level);
      ASSERT_EQ(last, want) << to_string(level);
    }
  }
}

// 16-bit patterns of every class: NaNs (quiet and signalling, both signs, several payloads),
// infinities, zeros, subnormals, the largest finite values (whose sums overflow), ordinary values.
std::uint16_t special_pattern(ElementFormat f, std::mt19937& rng) {
  const bool half = f == ElementFormat::float16;
  const std::uint16_t exponent_mask = half ? 0x7C00 : 0x7F80, mantissa_mask = half ? 0x03FF : 0x007F;
  const auto sign = static_cast<std::uint16_t>(rng() % 2 ? 0x8000 : 0);
  const auto mantissa = static_cast<std::uint16_t>(rng() & mantissa_mask);
  switch (rng() % 8) {
    case 0: return static_cast<std::uint16_t>(sign | exponent_mask | (mantissa ? mantissa : 1));  // NaN
    case 1: return static_cast<std::uint16_t>(sign | exponent_mask);                             // infinity
    case 2: return sign;                                                                          // zero
    case 3: return static_cast<std::uint16_t>(sign | (mantissa ? mantissa : 1));                  // subnormal
    case 4: return static_cast<std::uint16_t>(sign | (exponent_mask - (mantissa_mask + 1)) | mantissa);  // largest binade
    default: return static_cast<std::uint16_t>(rng());  // anything, mostly ordinary values
  }
}

// a + b in float32 where two NaNs meet, the first one, quieted (as x86's add does with the sum
// as its first operand; the compiler may pick either order for a plain a + b).
float add_first_nan_wins(float a, float b) {
  if (std::isnan(a)) return std::bit_cast<float>(std::bit_cast<std::uint32_t>(a) | 0x400000u);
  if (std::isnan(b)) return std::bit_cast<float>(std::bit_cast<std::uint32_t>(b) | 0x400000u);
  return a + b;
}

// The widened sum of element i as convert.hpp defines it, one element at a time through the
// scalar conversions: s = running or the first source, + each further source in order, in float32.
float widened_sum_of(ElementFormat f, const float* running, const std::vector<std::vector<std::uint16_t>>& sources, std::size_t i) {
  std::size_t k = 0;
  float s = running ? running[i] : widen_one(f, sources[k++][i]);
  for (; k < sources.size(); ++k) s = add_first_nan_wins(s, widen_one(f, sources[k][i]));
  return s;
}

// The fused pass (every source widened and added in a register, rounded once) at every level the
// CPU runs, against the element-by-element reference and the scalar level, bit for bit: lengths
// around and between the vector widths (the kernels' tails), from one to seven sources, starting
// from the 16-bit sources or a float32 running sum, ending in the running sum or rounded (with a
// second copy), over NaNs, infinities, subnormals and overflowing sums.
TEST(Elements, FusedWidenedSumMatchesTheReferenceBitwiseAtEveryLevel) {
  std::mt19937 rng(23);
  const std::size_t lengths[] = {1, 7, 8, 9, 15, 16, 17, 31, 33, 63, 64, 65, 127, 129, 1000, 1023, 1025, 4099};
  for (ElementFormat f : kHalfFormats) {
    for (std::size_t n : lengths) {
      for (int count = 1; count <= 7; ++count) {
        std::vector<std::vector<std::uint16_t>> in(static_cast<std::size_t>(count), std::vector<std::uint16_t>(n));
        for (auto& v : in)
          for (auto& x : v) x = special_pattern(f, rng);
        std::vector<float> running(n);
        for (std::size_t i = 0; i < n; ++i)
          running[i] = i % 5 ? widen_one(f, special_pattern(f, rng)) : std::bit_cast<float>(static_cast<std::uint32_t>(rng()));
        std::vector<const void*> sources;
        for (auto& v : in) sources.push_back(v.data());
        for (const bool from_running : {false, true}) {
          const float* start = from_running ? running.data() : nullptr;
          std::vector<float> want_sum(n);
          std::vector<std::uint16_t> want(n);
          for (std::size_t i = 0; i < n; ++i) {
            want_sum[i] = widened_sum_of(f, start, in, i);
            want[i] = narrow_one(f, want_sum[i]);
          }
          for (ConvertLevel level : kLevels) {
            const std::string what = std::string(to_string(f)) + " " + to_string(level) + " n=" + std::to_string(n) +
                                     " sources=" + std::to_string(count) + (from_running ? " from running" : "");
            std::vector<float> sum(n, -1.0f);
            sum_widened({f, start, sources.data(), count, sum.data(), nullptr, nullptr}, n, level);
            ASSERT_EQ(std::memcmp(sum.data(), want_sum.data(), n * sizeof(float)), 0) << what;
            std::vector<std::uint16_t> out(n, 0xAAAA), also(n, 0x5555);
            sum_widened({f, start, sources.data(), count, nullptr, out.data(), also.data()}, n, level);
            ASSERT_EQ(out, want) << what;
            ASSERT_EQ(also, want) << what;
            std::vector<std::uint16_t> scalar(n);
            sum_widened({f, start, sources.data(), count, nullptr, scalar.data(), nullptr}, n, ConvertLevel::scalar);
            ASSERT_EQ(out, scalar) << what;
          }
        }
      }
    }
  }
}

TEST(Elements, WidenedSumOfOneSourceCopiesIt) {
  for (ElementFormat f : kHalfFormats) {
    auto all = every_pattern();
    for (auto& p : all)
      if (is_nan(f, p)) p = 0;
    std::vector<std::uint16_t> out(all.size());
    const void* source[] = {all.data()};
    sum_widened({f, nullptr, source, 1, nullptr, out.data(), nullptr}, all.size());
    EXPECT_EQ(out, all) << to_string(f);
  }
}

}  // namespace
}  // namespace optireduce
