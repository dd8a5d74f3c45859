// The op probe of the interposer (pmpi/op_probe.hpp), without MPI: reduction functions written
// as users write them, over 2-byte elements, each either recognised as the sum it is or not
// recognised at all. The engine's conversions (elements/convert.hpp) serve as an independent
// implementation of fp16 and bf16.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "op_probe.hpp"
#include "optireduce/elements/convert.hpp"

namespace optireduce::pmpi {
namespace {

float widen1(ElementFormat f, std::uint16_t h) {
  float x = 0;
  widen(f, &h, &x, 1, ConvertLevel::scalar);
  return x;
}
std::uint16_t narrow1(ElementFormat f, float x) {
  std::uint16_t h = 0;
  narrow(f, &x, &h, 1, ConvertLevel::scalar);
  return h;
}

// An op on 16-bit floats: inout[i] = combine(in[i], inout[i]), in float32, rounded to nearest.
template <ElementFormat F, float (*Combine)(float, float)>
void elementwise(void*, void* in, void* inout, int len) {
  const auto* a = static_cast<const std::uint16_t*>(in);
  auto* b = static_cast<std::uint16_t*>(inout);
  for (int i = 0; i < len; ++i) b[i] = narrow1(F, Combine(widen1(F, a[i]), widen1(F, b[i])));
}

float add(float a, float b) { return a + b; }
float maximum(float a, float b) { return std::fmax(a, b); }
float minimum(float a, float b) { return std::fmin(a, b); }
float product(float a, float b) { return a * b; }
float difference(float a, float b) { return a - b; }
float twice_first_plus_second(float a, float b) { return 2 * a + b; }

// Horovod's recipe: whole vectors converted at once (the engine's fastest kernels), summed in
// float32, rounded back.
template <ElementFormat F>
void vector_sum(void*, void* in, void* inout, int len) {
  std::vector<float> a(static_cast<std::size_t>(len)), b(a.size());
  widen(F, in, a.data(), a.size());
  widen(F, inout, b.data(), b.size());
  for (std::size_t i = 0; i < a.size(); ++i) b[i] += a[i];
  narrow(F, b.data(), inout, b.size());
}

// Summed in double, rounded once: the same bits as float32 for two operands.
void float16_sum_in_double(void*, void* in, void* inout, int len) {
  const auto* a = static_cast<const std::uint16_t*>(in);
  auto* b = static_cast<std::uint16_t*>(inout);
  for (int i = 0; i < len; ++i) {
    const double s = static_cast<double>(widen1(ElementFormat::float16, a[i])) + widen1(ElementFormat::float16, b[i]);
    b[i] = narrow1(ElementFormat::float16, static_cast<float>(s));
  }
}

// The sum, rounded toward zero instead of to nearest.
template <ElementFormat F>
void truncating_sum(void*, void* in, void* inout, int len) {
  const auto* a = static_cast<const std::uint16_t*>(in);
  auto* b = static_cast<std::uint16_t*>(inout);
  for (int i = 0; i < len; ++i) {
    const float s = widen1(F, a[i]) + widen1(F, b[i]);
    std::uint16_t r = narrow1(F, s);
    if (std::fabs(widen1(F, r)) > std::fabs(s)) --r;  // one step back toward zero
    b[i] = r;
  }
}

// Aborts the process on a NaN or an infinity in either 16-bit reading: the probe never gives one.
void fp16_sum_that_aborts_on_nan(void* context, void* in, void* inout, int len) {
  for (const void* buffer : {static_cast<const void*>(in), static_cast<const void*>(inout)}) {
    const auto* v = static_cast<const std::uint16_t*>(buffer);
    for (int i = 0; i < len; ++i)
      if (!std::isfinite(widen1(ElementFormat::float16, v[i])) || !std::isfinite(widen1(ElementFormat::bfloat16, v[i])))
        std::abort();
  }
  elementwise<ElementFormat::float16, add>(context, in, inout, len);
}

void int16_sum(void*, void* in, void* inout, int len) {
  const auto* a = static_cast<const std::int16_t*>(in);
  auto* b = static_cast<std::int16_t*>(inout);
  for (int i = 0; i < len; ++i) b[i] = static_cast<std::int16_t>(a[i] + b[i]);
}

// A float32 sum given 2-byte elements: over len / 2 floats, or over len floats (twice the bytes).
void float32_sum_of_pairs(void*, void* in, void* inout, int len) {
  for (int i = 0; i < len / 2; ++i) {
    float a = 0, b = 0;
    std::memcpy(&a, static_cast<const char*>(in) + 4 * i, 4);
    std::memcpy(&b, static_cast<const char*>(inout) + 4 * i, 4);
    b += a;
    std::memcpy(static_cast<char*>(inout) + 4 * i, &b, 4);
  }
}
void float32_sum_of_len_floats(void*, void* in, void* inout, int len) {
  auto* a = static_cast<const float*>(in);
  auto* b = static_cast<float*>(inout);
  for (int i = 0; i < len; ++i) b[i] += a[i];
}

void does_nothing(void*, void*, void*, int) {}
void copies(void*, void* in, void* inout, int len) { std::memcpy(inout, in, 2 * static_cast<std::size_t>(len)); }

// An fp16 sum that also writes one element past the end.
void sum_and_one_more(void* context, void* in, void* inout, int len) {
  elementwise<ElementFormat::float16, add>(context, in, inout, len + 1);
}

// Sums only a multiple of 8 elements: a vector loop that forgot its tail.
void sum_without_tail(void* context, void* in, void* inout, int len) {
  elementwise<ElementFormat::float16, add>(context, in, inout, len - len % 8);
}

TEST(OpProbe, RecognisesFloat16Sums) {
  EXPECT_EQ(probe_16bit_sum(&elementwise<ElementFormat::float16, add>, nullptr), SumVerdict::float16);
  EXPECT_EQ(probe_16bit_sum(&vector_sum<ElementFormat::float16>, nullptr), SumVerdict::float16);
  EXPECT_EQ(probe_16bit_sum(&float16_sum_in_double, nullptr), SumVerdict::float16);
}

TEST(OpProbe, RecognisesBfloat16Sums) {
  EXPECT_EQ(probe_16bit_sum(&elementwise<ElementFormat::bfloat16, add>, nullptr), SumVerdict::bfloat16);
  EXPECT_EQ(probe_16bit_sum(&vector_sum<ElementFormat::bfloat16>, nullptr), SumVerdict::bfloat16);
}

TEST(OpProbe, OtherReductionsOfTheSameFormatsAreNotSums) {
  EXPECT_EQ(probe_16bit_sum(&elementwise<ElementFormat::float16, maximum>, nullptr), SumVerdict::none);
  EXPECT_EQ(probe_16bit_sum(&elementwise<ElementFormat::bfloat16, maximum>, nullptr), SumVerdict::none);
  EXPECT_EQ(probe_16bit_sum(&elementwise<ElementFormat::float16, minimum>, nullptr), SumVerdict::none);
  EXPECT_EQ(probe_16bit_sum(&elementwise<ElementFormat::float16, product>, nullptr), SumVerdict::none);
  EXPECT_EQ(probe_16bit_sum(&elementwise<ElementFormat::bfloat16, product>, nullptr), SumVerdict::none);
}

TEST(OpProbe, NonCommutativeOpsAreNotSums) {
  EXPECT_EQ(probe_16bit_sum(&elementwise<ElementFormat::float16, difference>, nullptr), SumVerdict::none);
  EXPECT_EQ(probe_16bit_sum(&elementwise<ElementFormat::float16, twice_first_plus_second>, nullptr), SumVerdict::none);
  EXPECT_EQ(probe_16bit_sum(&elementwise<ElementFormat::bfloat16, twice_first_plus_second>, nullptr), SumVerdict::none);
}

TEST(OpProbe, SumsOfOtherTypesAreNotRecognised) {
  EXPECT_EQ(probe_16bit_sum(&int16_sum, nullptr), SumVerdict::none);
  EXPECT_EQ(probe_16bit_sum(&float32_sum_of_pairs, nullptr), SumVerdict::none);
  EXPECT_EQ(probe_16bit_sum(&float32_sum_of_len_floats, nullptr), SumVerdict::none);
}

TEST(OpProbe, RoundingOtherThanToNearestIsNotRecognised) {
  EXPECT_EQ(probe_16bit_sum(&truncating_sum<ElementFormat::float16>, nullptr), SumVerdict::none);
  EXPECT_EQ(probe_16bit_sum(&truncating_sum<ElementFormat::bfloat16>, nullptr), SumVerdict::none);
}

TEST(OpProbe, OpsThatGetTheBuffersWrongAreNotSums) {
  EXPECT_EQ(probe_16bit_sum(&does_nothing, nullptr), SumVerdict::none);
  EXPECT_EQ(probe_16bit_sum(&copies, nullptr), SumVerdict::none);
  EXPECT_EQ(probe_16bit_sum(&sum_and_one_more, nullptr), SumVerdict::none);
  EXPECT_EQ(probe_16bit_sum(&sum_without_tail, nullptr), SumVerdict::none);
}

// Gives the probe no NaN or infinity in either format, so an op that aborts on one runs through
// (and is still recognised).
TEST(OpProbe, AnOpThatAbortsOnNanRunsThrough) {
  EXPECT_EQ(probe_16bit_sum(&fp16_sum_that_aborts_on_nan, nullptr), SumVerdict::float16);
}

// The context reaches the op unchanged (the interposer passes the call's datatype through it).
TEST(OpProbe, PassesTheContext) {
  int calls = 0;
  probe_16bit_sum([](void* context, void*, void*, int len) {
    ++*static_cast<int*>(context);
    EXPECT_GT(len, 64) << "a vector loop's tail must be exercised";
    EXPECT_EQ(len % 2, 1);
  }, &calls);
  EXPECT_EQ(calls, 2);
}

}  // namespace
}  // namespace optireduce::pmpi
