// The conversion loops, compiled once per level (elements/scalar.cpp; elements/vector.cpp twice,
// 8 and 16 lanes, each with its own flags); elements/convert.cpp picks one at run time. Each level
// supplies Lanes (VectorLanes below for the vector levels): widen, narrow and the widened sum of
// whole vectors' worth of elements (the scalar reference does the tail).
// Everything below the declarations is in an anonymous namespace, so each object keeps its own
// copy, built with its own flags.
#pragma once

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

inline std::uint16_t load16(const void* p, std::size_t i) {
  std::uint16_t v;
  std::memcpy(&v, static_cast<const std::byte*>(p) + 2 * i, 2);
  return v;
}
inline void store16(void* p, std::size_t i, std::uint16_t v) { std::memcpy(static_cast<std::byte*>(p) + 2 * i, &v, 2); }

inline float widen_one(ElementFormat f, std::uint16_t h) {
  return f == ElementFormat::float16 ? half_to_float(h) : bfloat16_to_float(h);
}
inline std::uint16_t narrow_one(ElementFormat f, float v) {
  return f == ElementFormat::float16 ? float_to_half(v) : float_to_bfloat16(v);
}

// From element `from` on, one at a time.
inline void widen_tail(ElementFormat f, const void* in, float* out, std::size_t from, std::size_t n) {
  for (std::size_t i = from; i < n; ++i) out[i] = widen_one(f, load16(in, i));
}
inline void narrow_tail(ElementFormat f, const float* in, void* out, std::size_t from, std::size_t n) {
  for (std::size_t i = from; i < n; ++i) store16(out, i, narrow_one(f, in[i]));
}
// The widened sum (convert.hpp) of each element from `from` on: every source added in order to a
// float32, rounded once.
inline void sum_tail(const WidenedSum& s, std::size_t from, std::size_t n) {
  for (std::size_t i = from; i < n; ++i) {
    int k = 0;
    float acc;
    if (s.running) {
      acc = s.running[i];
    } else {
      acc = widen_one(s.format, load16(s.sources[0], i));
      k = 1;
    }
    for (; k < s.count; ++k) acc += widen_one(s.format, load16(s.sources[k], i));
    if (!s.rounded) {
      s.running_out[i] = acc;
      continue;
    }
    const std::uint16_t h = narrow_one(s.format, acc);
    store16(s.rounded, i, h);
    if (s.rounded_also) store16(s.rounded_also, i, h);
  }
}

// Lanes::widen / narrow / sum do the first n elements, or a prefix of them (a whole number of
// vectors), and return how many they did.
template <typename Lanes>
void widen_all(ElementFormat f, const void* in, float* out, std::size_t n) {
  widen_tail(f, in, out, Lanes::widen(f, in, out, n), n);
}
template <typename Lanes>
void narrow_all(ElementFormat f, const float* in, void* out, std::size_t n) {
  narrow_tail(f, in, out, Lanes::narrow(f, in, out, n), n);
}
template <typename Lanes>
void sum_widened_all(const WidenedSum& s, std::size_t n) {
  sum_tail(s, Lanes::sum(s, n), n);
}

// Lanes of N elements written once over GCC's vector extensions and compiled in each level's
// object with its flags (N = 8: AVX2 + F16C; 16: AVX-512), so every level runs the scalar
// reference's arithmetic. bfloat16 is integer arithmetic (widened by the level's BfloatToFloat:
// zero-extend and shift, in two instructions where GCC's own conversion of the vector takes five);
// float16 takes the level's own conversion instructions (HalfToFloat, FloatToHalf: N lanes), which
// round as the reference does.
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

template <std::size_t N, auto HalfToFloat, auto FloatToHalf, auto BfloatToFloat>
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
  static F32 widen_bfloat(U16 h) { return vector_as<F32>(BfloatToFloat(vector_as<decltype(argument_of(BfloatToFloat))>(h))); }

  template <ElementFormat F>
  static F32 load_widened(const void* in, std::size_t i) {
    U16 h;
    std::memcpy(&h, static_cast<const std::byte*>(in) + 2 * i, sizeof h);
    if constexpr (F == ElementFormat::float16) return widen_half(h);
    else return widen_bfloat(h);
  }
  template <ElementFormat F>
  static U16 rounded(F32 v) {
    if constexpr (F == ElementFormat::float16) return narrow_half(v);
    else return __builtin_convertvector(bfloat16_round((U32)v), U16);
  }
  static void store(void* out, std::size_t i, U16 h) { std::memcpy(static_cast<std::byte*>(out) + 2 * i, &h, sizeof h); }

  template <ElementFormat F>
  static std::size_t widen_as(const void* in, float* out, std::size_t n) {
    std::size_t i = 0;
    for (; i + N <= n; i += N) {
      const F32 v = load_widened<F>(in, i);
      std::memcpy(out + i, &v, sizeof v);
    }
    return i;
  }
  template <ElementFormat F>
  static std::size_t narrow_as(const float* in, void* out, std::size_t n) {
    std::size_t i = 0;
    for (; i + N <= n; i += N) {
      F32 v;
      std::memcpy(&v, in + i, sizeof v);
      store(out, i, rounded<F>(v));
    }
    return i;
  }
  static std::size_t widen(ElementFormat f, const void* in, float* out, std::size_t n) {
    return f == ElementFormat::float16 ? widen_as<ElementFormat::float16>(in, out, n) : widen_as<ElementFormat::bfloat16>(in, out, n);
  }
  static std::size_t narrow(ElementFormat f, const float* in, void* out, std::size_t n) {
    return f == ElementFormat::float16 ? narrow_as<ElementFormat::float16>(in, out, n) : narrow_as<ElementFormat::bfloat16>(in, out, n);
  }

  static F32 load(const float* p) {
    F32 v;
    std::memcpy(&v, p, sizeof v);
    return v;
  }
  static void store(float* p, F32 v) { std::memcpy(p, &v, sizeof v); }

  // The widened sum of U vectors from element i on, in one pass: each vector's sum stays in a
  // register while every source is widened and added to it, in order, and is rounded (or stored
  // as float32) once. Every source is read before anything is written, so a source may be an
  // output at the same place. (`s` by value: a store through an output cannot change it.)
  template <ElementFormat F, int U>
  static void sum_vectors(const WidenedSum s, std::size_t i) {
    F32 acc[U];
    int k = 0;
    if (s.running) {
#pragma GCC unroll 4
      for (int u = 0; u < U; ++u) acc[u] = load(s.running + i + u * N);
    } else {
#pragma GCC unroll 4
      for (int u = 0; u < U; ++u) acc[u] = load_widened<F>(s.sources[0], i + u * N);
      k = 1;
    }
    for (; k < s.count; ++k) {
      const void* source = s.sources[k];
#pragma GCC unroll 4
      for (int u = 0; u < U; ++u) acc[u] += load_widened<F>(source, i + u * N);
    }
    if (!s.rounded) {
#pragma GCC unroll 4
      for (int u = 0; u < U; ++u) store(s.running_out + i + u * N, acc[u]);
      return;
    }
#pragma GCC unroll 4
    for (int u = 0; u < U; ++u) {
      const U16 h = rounded<F>(acc[u]);
      store(s.rounded, i + u * N, h);
      if (s.rounded_also) store(s.rounded_also, i + u * N, h);
    }
  }
  // Four vectors a step (independent sums for the adds' latency to overlap), then one.
  template <ElementFormat F>
  static std::size_t sum_as(const WidenedSum s, std::size_t n) {
    std::size_t i = 0;
    for (; i + 4 * N <= n; i += 4 * N) sum_vectors<F, 4>(s, i);
    for (; i + N <= n; i += N) sum_vectors<F, 1>(s, i);
    return i;
  }
  static std::size_t sum(const WidenedSum& s, std::size_t n) {
    return s.format == ElementFormat::float16 ? sum_as<ElementFormat::float16>(s, n) : sum_as<ElementFormat::bfloat16>(s, n);
  }
};

template <typename Lanes>
Kernels kernels_of() {
  return {&widen_all<Lanes>, &narrow_all<Lanes>, &sum_widened_all<Lanes>};
}

}  // namespace
}  // namespace optireduce::elements_detail
