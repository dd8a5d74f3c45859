// The transform's loops, compiled once per SIMD level (hadamard/scalar.cpp, hadamard/avx2.cpp,
// hadamard/avx512.cpp, each with its own flags); hadamard/hadamard.cpp picks one at run time.
//
// Every function here lives in an anonymous namespace: each translation unit keeps its own copy,
// built with its own flags. Shared inline functions would let the linker pick the AVX-512 copy
// for the scalar kernels.
#pragma once

#include <algorithm>
#include <bit>
#include <cstddef>
#include <cstdint>

namespace optireduce::hadamard_detail {

// The kernels' small helpers work on arrays of vectors: unless inlined, they go through memory.
#define OR_INLINE [[gnu::always_inline]] inline

// Blocks transformed together: the interleaved rows then fill whole cache lines (16 floats).
constexpr std::uint32_t kTile = 16;

struct Job {
  const float* in;
  float* out;
  std::uint64_t blocks;   // full blocks of `size` floats, stored interleaved
  std::uint32_t size;     // B, a power of two
  const float* signs;     // B signs, ±1
  float scale;            // 1 / sqrt(B)
  float* scratch;         // scratch_floats(B) floats, 64-byte aligned
};

namespace {
// The wide kernels (hadamard/simd.hpp) transform tiles of up to 8 sub-tiles of kTile blocks, so
// that they touch 64 x subs bytes of each interleaved row at a time. At 64 B the scattered rows
// cost about 3.5x a memcpy of the same bytes here (a DRAM page opened per line); from 256 B on,
// about 1x. The tile's scratch (per thread) grows with it, so wide tiles stop at kTileBytes.
constexpr unsigned kMaxSubTiles = 8;
constexpr std::size_t kTileBytes = std::size_t{4} << 20;
constexpr unsigned sub_tiles(std::uint32_t block) {
  const std::size_t fit = kTileBytes / (std::size_t{block} * kTile * sizeof(float));
  return static_cast<unsigned>(std::bit_floor(std::clamp<std::size_t>(fit, 1, kMaxSubTiles)));
}

// Room for the reference's tile, or for a wide tile with one padding row per 128 rows.
constexpr std::size_t scratch_floats(std::uint32_t block) {
  return std::max(std::size_t{kTile} * block, std::size_t{sub_tiles(block)} * kTile * (block + block / 128 + 2));
}
}  // namespace

struct Kernels {
  void (*encode_blocks)(const Job&);
  void (*decode_blocks)(const Job&);
  void (*encode_one)(const float*, float*, std::uint32_t, const float*, float);
  void (*decode_one)(const float*, float*, std::uint32_t, const float*, float);
};

Kernels scalar_kernels();
Kernels avx2_kernels();
Kernels avx512_kernels();

namespace {
// The plain loops: the scalar level, the oracle of the tests, and the wide kernels' fallback for
// blocks shorter than a vector row.
namespace reference {

// One butterfly stage over two halves that never overlap.
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

}  // namespace reference
}  // namespace
}  // namespace optireduce::hadamard_detail
