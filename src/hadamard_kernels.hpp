// The transform's loops, compiled once per SIMD level (hadamard_scalar.cpp, hadamard_avx2.cpp,
// hadamard_avx512.cpp, each with its own flags); hadamard.cpp picks one at run time.
#pragma once

#include <algorithm>
#include <cstdint>

namespace optireduce::hadamard_detail {

// Blocks transformed together: the interleaved writes then fill whole cache lines.
constexpr std::uint32_t kTile = 16;

struct Job {
  const float* in;
  float* out;
  std::uint64_t blocks;   // full blocks of `size` floats, stored interleaved
  std::uint32_t size;     // B, a power of two
  const float* signs;     // B signs, ±1
  float scale;            // 1 / sqrt(B)
  float* scratch;         // kTile * B floats
};

// One butterfly stage over two halves that never overlap; __restrict lets the compiler use
// whole vectors for it.
inline void butterfly(float* __restrict lo, float* __restrict hi, std::uint32_t h) {
  for (std::uint32_t j = 0; j < h; ++j) {
    const float a = lo[j], b = hi[j];
    lo[j] = a + b;
    hi[j] = a - b;
  }
}

// In-place unnormalised fast Walsh-Hadamard transform of n = 2^k floats.
inline void fwht(float* x, std::uint32_t n) {
  for (std::uint32_t h = 1; h < n; h <<= 1)
    for (std::uint32_t i = 0; i < n; i += 2 * h) butterfly(x + i, x + i + h, h);
}

inline void encode_blocks(const Job& job) {
  const std::uint32_t B = job.size;
  for (std::uint64_t b0 = 0; b0 < job.blocks; b0 += kTile) {
    const auto t = static_cast<std::uint32_t>(std::min<std::uint64_t>(kTile, job.blocks - b0));
    for (std::uint32_t k = 0; k < t; ++k) {
      float* x = job.scratch + static_cast<std::size_t>(k) * B;
      const float* src = job.in + (b0 + k) * B;
      for (std::uint32_t j = 0; j < B; ++j) x[j] = src[j] * job.signs[j];
      fwht(x, B);
    }
    for (std::uint32_t j = 0; j < B; ++j) {
      float* dst = job.out + static_cast<std::uint64_t>(j) * job.blocks + b0;
      for (std::uint32_t k = 0; k < t; ++k) dst[k] = job.scratch[static_cast<std::size_t>(k) * B + j] * job.scale;
    }
  }
}

inline void decode_blocks(const Job& job) {
  const std::uint32_t B = job.size;
  for (std::uint64_t b0 = 0; b0 < job.blocks; b0 += kTile) {
    const auto t = static_cast<std::uint32_t>(std::min<std::uint64_t>(kTile, job.blocks - b0));
    for (std::uint32_t j = 0; j < B; ++j) {
      const float* src = job.in + static_cast<std::uint64_t>(j) * job.blocks + b0;
      for (std::uint32_t k = 0; k < t; ++k) job.scratch[static_cast<std::size_t>(k) * B + j] = src[k];
    }
    for (std::uint32_t k = 0; k < t; ++k) {
      float* x = job.scratch + static_cast<std::size_t>(k) * B;
      fwht(x, B);
      float* dst = job.out + (b0 + k) * B;
      for (std::uint32_t j = 0; j < B; ++j) dst[j] = x[j] * job.scale * job.signs[j];
    }
  }
}

// One contiguous block (the ragged tail's pieces), not interleaved.
inline void encode_one(const float* in, float* out, std::uint32_t n, const float* signs, float scale) {
  for (std::uint32_t j = 0; j < n; ++j) out[j] = in[j] * signs[j];
  fwht(out, n);
  for (std::uint32_t j = 0; j < n; ++j) out[j] *= scale;
}

inline void decode_one(const float* in, float* out, std::uint32_t n, const float* signs, float scale) {
  std::copy(in, in + n, out);
  fwht(out, n);
  for (std::uint32_t j = 0; j < n; ++j) out[j] *= scale * signs[j];
}

struct Kernels {
  void (*encode_blocks)(const Job&);
  void (*decode_blocks)(const Job&);
  void (*encode_one)(const float*, float*, std::uint32_t, const float*, float);
  void (*decode_one)(const float*, float*, std::uint32_t, const float*, float);
};

Kernels scalar_kernels();
Kernels avx2_kernels();
Kernels avx512_kernels();

}  // namespace optireduce::hadamard_detail

// Each SIMD translation unit stamps out its kernel table with this.
#define OR_HADAMARD_KERNELS(name)                                                              \
  namespace optireduce::hadamard_detail {                                                              \
  namespace {                                                                                          \
  void enc_blocks(const Job& j) { encode_blocks(j); }                                                  \
  void dec_blocks(const Job& j) { decode_blocks(j); }                                                  \
  void enc_one(const float* i, float* o, std::uint32_t n, const float* s, float c) { encode_one(i, o, n, s, c); } \
  void dec_one(const float* i, float* o, std::uint32_t n, const float* s, float c) { decode_one(i, o, n, s, c); } \
  }                                                                                                    \
  Kernels name() { return {&enc_blocks, &dec_blocks, &enc_one, &dec_one}; }                           \
  }
