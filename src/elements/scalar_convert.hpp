// One element at a time: the reference every vector kernel matches bit for bit (and what the
// kernels do with a ragged tail). Round to nearest, ties to even, by integer arithmetic (so
// neither the rounding mode nor flush-to-zero of the caller's thread changes a bit); subnormals
// kept; a NaN stays a NaN of the same sign and payload, quieted (what F16C's vcvtph2ps and
// vcvtps2ph do).
//
// In an anonymous namespace: each translation unit keeps its own copy, built with its own flags
// (a shared inline function would let the linker pick a copy built for AVX-512).
#pragma once

#include <bit>
#include <cstdint>

namespace optireduce::elements_detail {
namespace {

inline float half_to_float(std::uint16_t h) {
  const std::uint32_t sign = std::uint32_t{h & 0x8000u} << 16;
  const std::uint32_t exponent = (h >> 10) & 0x1Fu, mantissa = h & 0x3FFu;
  if (exponent == 0x1F) return std::bit_cast<float>(sign | 0x7F800000u | (mantissa ? 0x400000u | (mantissa << 13) : 0u));
  if (exponent != 0) return std::bit_cast<float>(sign | ((exponent + 112) << 23) | (mantissa << 13));
  if (mantissa == 0) return std::bit_cast<float>(sign);
  // Subnormal: mantissa x 2^-24, normal in float32.
  const int shift = std::countl_zero(mantissa) - 21;  // brings the leading 1 to bit 10
  return std::bit_cast<float>(sign | (std::uint32_t(113 - shift) << 23) | (((mantissa << shift) & 0x3FFu) << 13));
}

inline std::uint16_t float_to_half(float f) {
  const std::uint32_t u = std::bit_cast<std::uint32_t>(f);
  const auto sign = static_cast<std::uint16_t>((u >> 16) & 0x8000u);
  const std::uint32_t a = u & 0x7FFFFFFFu;
  if (a > 0x7F800000u) return static_cast<std::uint16_t>(sign | 0x7E00u | ((a >> 13) & 0x3FFu));  // NaN
  if (a >= 0x477FF000u) return static_cast<std::uint16_t>(sign | 0x7C00u);  // 65520 and up round to infinity
  if (a >= 0x38800000u) {  // 2^-14 and up: normal
    const std::uint32_t rounded = a + 0xFFFu + ((a >> 13) & 1u);
    return static_cast<std::uint16_t>(sign | ((rounded - 0x38000000u) >> 13));
  }
  if (a <= 0x33000000u) return sign;  // up to 2^-25 (a tie with zero): zero
  // Subnormal: the value in units of 2^-24, rounded (2^-14 rounds up to the smallest normal).
  const std::uint32_t exponent = a >> 23, mantissa = (a & 0x7FFFFFu) | 0x800000u;
  const std::uint32_t shift = 126 - exponent;  // 14 ..< 25
  const std::uint32_t rounded = (mantissa + (1u << (shift - 1)) - 1u + ((mantissa >> shift) & 1u)) >> shift;
  return static_cast<std::uint16_t>(sign | rounded);
}

inline float bfloat16_to_float(std::uint16_t b) { return std::bit_cast<float>(std::uint32_t{b} << 16); }

inline std::uint16_t float_to_bfloat16(float f) {
  const std::uint32_t u = std::bit_cast<std::uint32_t>(f);
  if ((u & 0x7FFFFFFFu) > 0x7F800000u) return static_cast<std::uint16_t>((u >> 16) | 0x40u);  // NaN, quieted
  return static_cast<std::uint16_t>((u + 0x7FFFu + ((u >> 16) & 1u)) >> 16);
}

}  // namespace
}  // namespace optireduce::elements_detail
