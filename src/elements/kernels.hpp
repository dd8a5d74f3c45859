// The conversion loops, compiled once per level (elements/scalar.cpp; elements/vector.cpp twice,
// 8 and 16 lanes, each with its own flags); elements/convert.cpp picks one at run time. Each level
// supplies Lanes (VectorLanes below for the vector levels): widen and narrow of whole vectors'
// worth of elements (the scalar reference does the tail).
// Everything below the declarations is in an anonymous namespace, so each object keeps its own
// copy, built with its own flags.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "optireduce/elements/convert.hpp"
#include "optireduce/elements/scalar_convert.hpp"

namespace optireduce::elements_detail {

struct Kernels {
  void (*widen)(ElementFormat, const void*, float*, std::size_t);
  void (*narrow)(ElementFormat, const float*, void*, std::size_t);
  void (*sum_widened)(const WidenedSum&, std::size_t);
};

Kernels scalar_kernels();
// The vector levels, by elements per vector: 8 (AVX2 + F16C), 16 (AVX-512); elements/vector.cpp
// defines each in its own object.
template <std::size_t Lanes>
Kernels vector_kernels();
template <>
Kernels vector_kernels<8>();
template <>
Kernels vector_kernels<16>();

namespace {

// A block stays in L1 while every source is added to it.
constexpr std::size_t kBlock = 1024;

inline std::uint16_t load16(const void* p, std::size_t i) {
  std::uint16_t v;
  std::memcpy(&v, static_cast<const std::byte*>(p) + 2 * i, 2);
  return v;
}
inline void store16(void* p, std::size_t i, std::uint16_t v) { std::memcpy(static_cast<std::byte*>(p) + 2 * i, &v, 2); }

// From element `from` on, one at a time.
inline void widen_tail(ElementFormat f, const void* in, float* out, std::size_t from, std::size_t n) {
  for (std::size_t i = from; i < n; ++i)
    out[i] = f == ElementFormat::float16 ? half_to_float(load16(in, i)) : bfloat16_to_float(load16(in, i));
}
inline void narrow_tail(ElementFormat f, const float* in, void* out, std::size_t from, std::size_t n) {
  for (std::size_t i = from; i < n; ++i)
    store16(out, i, f == ElementFormat::float16 ? float_to_half(in[i]) : float_to_bfloat16(in[i]));
}

// Lanes::widen / Lanes::narrow convert the first n elements, or a prefix of them (a whole number
// of vectors), and return how many they did.
template <typename Lanes>
void widen_all(ElementFormat f, const void* in, float* out, std::size_t n) {
  widen_tail(f, in, out, Lanes::widen(f, in, out, n), n);
}
template <typename Lanes>
void narrow_all(ElementFormat f, const float* in, void* out, std::size_t n) {
  narrow_tail(f, in, out, Lanes::narrow(f, in, out, n), n);
}

const void* advanced(const void* p, std::size_t elements) { return static_cast<const std::byte*>(p) + 2 * elements; }
void* advanced(void* p, std::size_t elements) { return static_cast<std::byte*>(p) + 2 * elements; }

template <typename Lanes>
void sum_widened_blocks(const WidenedSum& s, std::size_t n) {
  alignas(64) float acc[kBlock];
  alignas(64) float next[kBlock];
  for (std::size_t b = 0; b < n; b += kBlock) {
    const std::size_t m = std::min(kBlock, n - b);
    int k = 0;
    if (s.running) {
      std::memcpy(acc, s.running + b, m * sizeof(float));
    } else {
      widen_all<Lanes>(s.format, advanced(s.sources[0], b), acc, m);
      k = 1;
    }
    for (; k < s.count; ++k) {
      widen_all<Lanes>(s.format, advanced(s.sources[k], b), next, m);
      for (std::size_t i = 0; i < m; ++i) acc[i] += next[i];
    }
    if (!s.rounded) {
      std::memcpy(s.running_out + b, acc, m * sizeof(float));
      continue;
    }
    narrow_all<Lanes>(s.format, acc, advanced(s.rounded, b), m);
    if (s.rounded_also) std::memcpy(advanced(s.rounded_also, b), advanced(s.rounded, b), 2 * m);
  }
}

// Lanes of N elements written once over GCC's vector extensions and compiled in each level's
// object with its flags (N = 8: AVX2 + F16C; 16: AVX-512), so every level runs the
// scalar reference's arithmetic. bfloat16 is integer arithmetic; float16 takes the level's own
// conversion instructions (HalfToFloat, FloatToHalf: N lanes), which round as the reference does.
// (The vector types are spelled per width: GCC's __builtin_convertvector takes no vector type
// whose size depends on a template parameter.)
template <std::size_t N>
struct VectorTypes;
template <>
struct VectorTypes<8> {
  typedef std::uint16_t U16 __attribute__((vector_size(16)));
  typedef std::uint32_t U32 __attribute__((vector_size(32)));
  typedef float F32 __attribute__((vector_size(32)));
};
template <>
struct VectorTypes<16> {
  typedef std::uint16_t U16 __attribute__((vector_size(32)));
  typedef std::uint32_t U32 __attribute__((vector_size(64)));
  typedef float F32 __attribute__((vector_size(64)));
};

// The same bits as another vector type of the same size (an intrinsic's __m256i for a U16, ...).
template <typename To, typename From>
To vector_as(From v) {
  static_assert(sizeof(To) == sizeof(From));
  To t;
  std::memcpy(&t, &v, sizeof t);
  return t;
}
template <typename R, typename A>
A argument_of(R (*)(A));

template <std::size_t N, auto HalfToFloat, auto FloatToHalf>
struct VectorLanes {
  using U16 = typename VectorTypes<N>::U16;
  using U32 = typename VectorTypes<N>::U32;
  using F32 = typename VectorTypes<N>::F32;

  static U32 bfloat16_round(U32 u) {
    const U32 rounded = (u + 0x7FFFu + ((u >> 16) & 1u)) >> 16;
    const U32 quieted = (u >> 16) | 0x40u;
    return (u & 0x7FFFFFFFu) > 0x7F800000u ? quieted : rounded;
  }
  static F32 widen_half(U16 h) { return vector_as<F32>(HalfToFloat(vector_as<decltype(argument_of(HalfToFloat))>(h))); }
  static U16 narrow_half(F32 v) { return vector_as<U16>(FloatToHalf(vector_as<decltype(argument_of(FloatToHalf))>(v))); }

  static std::size_t widen(ElementFormat f, const void* in, float* out, std::size_t n) {
    const auto* src = static_cast<const std::byte*>(in);
    std::size_t i = 0;
    for (; i + N <= n; i += N) {
      U16 h;
      std::memcpy(&h, src + 2 * i, sizeof h);
      const F32 v = f == ElementFormat::float16 ? widen_half(h) : (F32)(__builtin_convertvector(h, U32) << 16);
      std::memcpy(out + i, &v, sizeof v);
    }
    return i;
  }
  static std::size_t narrow(ElementFormat f, const float* in, void* out, std::size_t n) {
    auto* dst = static_cast<std::byte*>(out);
    std::size_t i = 0;
    for (; i + N <= n; i += N) {
      F32 v;
      std::memcpy(&v, in + i, sizeof v);
      const U16 h = f == ElementFormat::float16 ? narrow_half(v) : __builtin_convertvector(bfloat16_round((U32)v), U16);
      std::memcpy(dst + 2 * i, &h, sizeof h);
    }
    return i;
  }
};

template <typename Lanes>
Kernels kernels_of() {
  return {&widen_all<Lanes>, &narrow_all<Lanes>, &sum_widened_blocks<Lanes>};
}

}  // namespace
}  // namespace optireduce::elements_detail
