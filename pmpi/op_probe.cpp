#include "op_probe.hpp"

#include <cmath>
#include <cstdint>
#include <optional>
#include <vector>

namespace optireduce::pmpi {
namespace {

constexpr int kPairs = 40;
constexpr int kLength = 2 * kPairs - 1;  // the pairs, then all but the last again, swapped
// Room for an op that takes the elements for 16-byte ones (complex double).
constexpr int kBufferElements = 8 * kLength;

// A 16-bit float: sign, exponent field, mantissa field.
struct Layout {
  int mantissa_bits;
  int exponent_bits;
  int bias;
  int max_field() const { return (1 << exponent_bits) - 1; }
};
constexpr Layout kFloat16{10, 5, 15};
constexpr Layout kBfloat16{7, 8, 127};

// The value of a pattern that is a normal number of the layout (nullopt otherwise).
std::optional<double> normal_value(const Layout& f, std::uint16_t bits) {
  const int field = (bits >> f.mantissa_bits) & f.max_field();
  if (field == 0 || field == f.max_field()) return std::nullopt;
  const int significand = (bits & ((1 << f.mantissa_bits) - 1)) | (1 << f.mantissa_bits);
  const double magnitude = std::ldexp(significand, field - f.bias - f.mantissa_bits);
  return (bits & 0x8000) ? -magnitude : magnitude;
}

// The pattern nearest `x` when that is a normal number and `x` is not halfway between two.
std::optional<std::uint16_t> nearest_unambiguous(const Layout& f, double x) {
  if (x == 0) return std::nullopt;
  int exponent = 0;
  const double scaled = std::ldexp(std::frexp(std::fabs(x), &exponent), f.mantissa_bits + 1);
  const double below = std::floor(scaled);
  if (scaled - below == 0.5) return std::nullopt;
  double significand = std::floor(scaled + 0.5);
  int field = exponent - 1 + f.bias;
  if (significand == std::ldexp(1.0, f.mantissa_bits + 1)) {
    significand /= 2;
    ++field;
  }
  if (field < 1 || field >= f.max_field()) return std::nullopt;
  const auto mantissa = static_cast<int>(significand) - (1 << f.mantissa_bits);
  return static_cast<std::uint16_t>((x < 0 ? 0x8000 : 0) | (field << f.mantissa_bits) | mantissa);
}

// Safe to hand to any op: normal in both formats, and no all-ones exponent for a double whose top
// 16 bits it would be.
bool harmless(std::uint16_t bits) {
  return normal_value(kFloat16, bits) && normal_value(kBfloat16, bits) && (bits & 0x7FF0) != 0x7FF0;
}

struct Probe {
  std::vector<std::uint16_t> in, inout, expected;
};

// Pairs of magnitudes within 2^±6 of one, fixed for every process (so every rank probes alike).
Probe make_probe(const Layout& f) {
  Probe p;
  std::uint32_t state = 0x2545F491u;
  auto next = [&state] {
    state = state * 1664525u + 1013904223u;
    return state >> 8;
  };
  auto draw = [&] {
    const int field = f.bias - 6 + static_cast<int>(next() % 13);
    const int mantissa = static_cast<int>(next() & ((1u << f.mantissa_bits) - 1));
    return static_cast<std::uint16_t>(((next() & 1) ? 0x8000 : 0) | (field << f.mantissa_bits) | mantissa);
  };
  while (static_cast<int>(p.in.size()) < kPairs) {
    const std::uint16_t a = draw(), b = draw();
    if (!harmless(a) || !harmless(b)) continue;
    const auto sum = nearest_unambiguous(f, *normal_value(f, a) + *normal_value(f, b));
    if (!sum || !harmless(*sum)) continue;
    p.in.push_back(a);
    p.inout.push_back(b);
    p.expected.push_back(*sum);
  }
  for (int i = 0; i + 1 < kPairs; ++i) {
    p.in.push_back(p.inout[i]);
    p.inout.push_back(p.in[i]);
    p.expected.push_back(p.expected[i]);
  }
  return p;
}

// What fills the slack of both buffers: a harmless non-zero number (an op that sums beyond the
// elements changes it).
constexpr std::uint16_t kSlack = 0x3C00;

bool behaves_as_sum(ApplyOp apply, void* context, const Probe& p) {
  std::vector<std::uint16_t> in(kBufferElements, kSlack), inout(kBufferElements, kSlack);
  std::copy(p.in.begin(), p.in.end(), in.begin());
  std::copy(p.inout.begin(), p.inout.end(), inout.begin());
  apply(context, in.data(), inout.data(), kLength);
  for (int i = 0; i < kBufferElements; ++i)
    if (inout[i] != (i < kLength ? p.expected[i] : kSlack)) return false;
  return true;
}

}  // namespace

SumVerdict probe_16bit_sum(ApplyOp apply, void* context) {
  static const Probe float16 = make_probe(kFloat16), bfloat16 = make_probe(kBfloat16);
  const bool f16 = behaves_as_sum(apply, context, float16);
  const bool bf16 = behaves_as_sum(apply, context, bfloat16);
  if (f16 == bf16) return SumVerdict::none;
  return f16 ? SumVerdict::float16 : SumVerdict::bfloat16;
}

const char* to_string(SumVerdict verdict) {
  switch (verdict) {
    case SumVerdict::none: return "none";
    case SumVerdict::float16: return "float16";
    case SumVerdict::bfloat16: return "bfloat16";
  }
  return "?";
}

}  // namespace optireduce::pmpi
