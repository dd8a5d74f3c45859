// The wide kernels of the transform, shared by hadamard_avx2.cpp and hadamard_avx512.cpp. Each of
// them first defines, in an anonymous namespace inside optireduce::hadamard_detail, a `Row` of 16
// floats (one cache line) and its operations: load, store, stream (non-temporal, 64-byte
// aligned), load_lanes / store_lanes (the first t lanes), zero, + and -, * by a float or a Row,
// transpose (16 rows in place), in_row_fwht (the first four stages within one row), and
// kRadixLog2 (how many stages one pass keeps in registers).
//
// Layout of a tile: 16 blocks side by side, "row" j = coordinate j of the 16 blocks, which is
// exactly what the interleaved encoded range stores at out[j * blocks + b0 ...]. Every butterfly
// stage is then a plain add and subtract of two rows; only the block-major side (the input of
// encode, the output of decode) needs a 16x16 transpose, fused with the first (last) four stages.
// The stages run as passes of up to 2^kRadixLog2 rows held in registers, over a part of the tile
// small enough for L1:
//   low stages  (h < 512 rows): per chunk of 512 consecutive rows (32 KiB);
//   high stages (h >= 512): per sweep over a few columns j mod 512 of every chunk.
// So the tile crosses L2 once; the signs and 1/sqrt(B) ride on the first or last pass, and the
// encoded side goes straight from or to the caller's buffer (non-temporal when it is large).
// Decode runs the same passes in the opposite order (the stages commute), so it costs the same
// as encode; its strided reads are prefetched one sweep ahead.
#pragma once

#include <immintrin.h>

#include <bit>
#include <cstddef>
#include <cstdint>

#include "hadamard_kernels.hpp"

namespace optireduce::hadamard_detail {
namespace {

constexpr std::uint32_t kLanes = 16;       // floats per Row = blocks per tile
constexpr unsigned kChunkLog2 = 9;         // rows of a chunk: 512 x 64 B = 32 KiB, within L1
constexpr unsigned kL1RowsLog2 = 9;        // rows a high-stage sweep may touch
// Beyond this much output, writing it around the caches saves reading it in first.
constexpr std::uint64_t kStreamingBytes = std::uint64_t{8} << 20;

static_assert(kLanes == kTile);

// Stages of 2^M rows held in registers; Descending runs them from the widest down.
template <unsigned M, bool Descending>
inline void butterflies(Row (&r)[1u << M]) {
#pragma GCC unroll 4
  for (unsigned s = 0; s < M; ++s) {
    const unsigned h = 1u << (Descending ? M - 1 - s : s);
#pragma GCC unroll 16
    for (unsigned i = 0; i < (1u << M); ++i)
      if (!(i & h)) {
        const Row a = r[i], b = r[i + h];
        r[i] = a + b;
        r[i + h] = a - b;
      }
  }
}

// Stages [a, a + M) over a set of `count` rows named 0..count-1: rows x + i 2^a form one group.
template <unsigned M, bool Descending, class Load, class Store>
inline void radix_pass(std::size_t count, unsigned a, Load load, Store store) {
  const std::size_t h = std::size_t{1} << a, span = h << M;
  for (std::size_t g = 0; g < count; g += span)
    for (std::size_t x = g; x < g + h; ++x) {
      Row r[1u << M];
#pragma GCC unroll 16
      for (unsigned i = 0; i < (1u << M); ++i) r[i] = load(x + i * h);
      butterflies<M, Descending>(r);
#pragma GCC unroll 16
      for (unsigned i = 0; i < (1u << M); ++i) store(x + i * h, r[i]);
    }
}

// Stages [lowest, lowest + stages) of a set of rows, as few register passes as possible, of
// balanced sizes. The first pass reads through first_load, the last writes through last_store,
// the others go through load / store (the tile's scratch).
template <bool Descending, class FirstLoad, class Load, class Store, class LastStore>
void run_stages(std::size_t count, unsigned lowest, unsigned stages, FirstLoad first_load, Load load, Store store,
                LastStore last_store) {
  const unsigned passes = (stages + kRadixLog2 - 1) / kRadixLog2;
  unsigned done = 0;
  for (unsigned p = 0; p < passes; ++p) {
    const unsigned m = (stages - done + (passes - p) - 1) / (passes - p);
    const unsigned a = Descending ? lowest + stages - done - m : lowest + done;
    auto pass = [&](auto ld, auto st) {
      switch (m) {
        case 1: radix_pass<1, Descending>(count, a, ld, st); break;
        case 2: radix_pass<2, Descending>(count, a, ld, st); break;
        case 3: radix_pass<3, Descending>(count, a, ld, st); break;
        default:
          if constexpr (kRadixLog2 >= 4) radix_pass<4, Descending>(count, a, ld, st);
          break;
      }
    };
    const bool first = p == 0, last = p + 1 == passes;
    if (first && last) pass(first_load, last_store);
    else if (first) pass(first_load, store);
    else if (last) pass(load, last_store);
    else pass(load, store);
    done += m;
  }
}

inline Row load_row(const float* p, unsigned t) { return t == kLanes ? load(p) : load_lanes(p, t); }

// Where the rows of one tile live while it is transformed, and the split of its stages.
struct TileShape {
  unsigned log2;        // L: B = 2^L
  unsigned chunk_log2;  // c: rows per chunk (low stages 4..c-1)
  unsigned cols_log2;   // columns per high-stage sweep (high stages c..L-1)
  explicit TileShape(std::uint32_t B)
      : log2(static_cast<unsigned>(std::countr_zero(B))),
        chunk_log2(std::min(log2, kChunkLog2)),
        cols_log2(std::min(chunk_log2, log2 - chunk_log2 >= kL1RowsLog2 ? 0u : kL1RowsLog2 - (log2 - chunk_log2))) {}
  std::size_t chunk() const { return std::size_t{1} << chunk_log2; }
  unsigned low_stages() const { return chunk_log2 - 4; }
  unsigned high_stages() const { return log2 - chunk_log2; }
  // One padding row per chunk, so the rows of a high-stage group (one per chunk) do not all map
  // to the same L1 set.
  float* row(float* scratch, std::size_t j) const { return scratch + (j + (j >> chunk_log2)) * kLanes; }
  // Row j of the sweep that starts at column lo0: x = column + (chunk index << cols_log2).
  std::size_t high_row(std::size_t lo0, std::size_t x) const {
    return lo0 + (x & ((std::size_t{1} << cols_log2) - 1)) + ((x >> cols_log2) << chunk_log2);
  }
};

// Where the encoded (interleaved) rows of tile b0 go or come from.
struct Interleaved {
  float* base;  // &encoded[b0]
  std::uint64_t stride;
  unsigned t;
  bool streaming;
  float* at(std::size_t j) const { return base + j * stride; }
  void put(std::size_t j, Row r) const {
    if (t < kLanes) store_lanes(at(j), r, t);
    else if (streaming) stream(at(j), r);
    else store(at(j), r);
  }
};

void encode_tile(const Job& job, std::uint64_t b0, unsigned t, bool streaming) {
  const std::uint32_t B = job.size;
  const TileShape shape(B);
  float* const S = job.scratch;
  const Interleaved out{job.out + b0, job.blocks, t, streaming};
  auto put_out = [&](std::size_t j, Row r) { out.put(j, r * job.scale); };
  auto from_scratch = [&](std::size_t j) { return load(shape.row(S, j)); };
  auto to_scratch = [&](std::size_t j, Row r) { store(shape.row(S, j), r); };

  const std::size_t chunk = shape.chunk();
  const bool single_pass = shape.log2 == 4;
  const bool low_is_last = shape.high_stages() == 0;
  for (std::size_t j0 = 0; j0 < B; j0 += chunk) {
    // Transpose 16 coordinates of the 16 blocks into rows, with the signs and stages h = 1..8.
    for (std::size_t j = j0; j < j0 + chunk; j += kLanes) {
      Row r[kLanes];
      for (unsigned k = 0; k < kLanes; ++k) r[k] = k < t ? load(job.in + (b0 + k) * B + j) : zero();
      transpose(r);
      for (unsigned i = 0; i < kLanes; ++i) r[i] = r[i] * job.signs[j + i];
      butterflies<4, false>(r);
      for (unsigned i = 0; i < kLanes; ++i) single_pass ? put_out(j + i, r[i]) : to_scratch(j + i, r[i]);
    }
    auto ld = [&](std::size_t x) { return from_scratch(j0 + x); };
    auto st = [&](std::size_t x, Row r) { to_scratch(j0 + x, r); };
    auto last = [&](std::size_t x, Row r) { low_is_last ? put_out(j0 + x, r) : to_scratch(j0 + x, r); };
    run_stages<false>(chunk, 4, shape.low_stages(), ld, ld, st, last);
  }
  const std::size_t cols = std::size_t{1} << shape.cols_log2;
  for (std::size_t lo0 = 0; shape.high_stages() && lo0 < chunk; lo0 += cols) {
    auto ld = [&](std::size_t x) { return from_scratch(shape.high_row(lo0, x)); };
    auto st = [&](std::size_t x, Row r) { to_scratch(shape.high_row(lo0, x), r); };
    auto last = [&](std::size_t x, Row r) { put_out(shape.high_row(lo0, x), r); };
    run_stages<false>(cols << shape.high_stages(), shape.cols_log2, shape.high_stages(), ld, ld, st, last);
  }
}

void decode_tile(const Job& job, std::uint64_t b0, unsigned t, bool streaming) {
  const std::uint32_t B = job.size;
  const TileShape shape(B);
  float* const S = job.scratch;
  const Interleaved in{const_cast<float*>(job.in) + b0, job.blocks, t, false};
  auto from_scratch = [&](std::size_t j) { return load(shape.row(S, j)); };
  auto to_scratch = [&](std::size_t j, Row r) { store(shape.row(S, j), r); };
  // The encoded rows are one cache line every `stride` floats, beyond the hardware prefetchers'
  // reach: each first read of a row fetches the same row of the next sweep (`ahead` floats on).
  auto get_in = [&](std::size_t j, std::ptrdiff_t ahead) {
    const float* p = in.at(j);
    _mm_prefetch(reinterpret_cast<const char*>(p + ahead), _MM_HINT_T0);
    return load_row(p, t);
  };
  const std::ptrdiff_t next_tile = kLanes;

  const std::size_t chunk = shape.chunk();
  const std::size_t cols = std::size_t{1} << shape.cols_log2;
  for (std::size_t lo0 = 0; shape.high_stages() && lo0 < chunk; lo0 += cols) {
    const std::ptrdiff_t ahead = lo0 + cols < chunk ? static_cast<std::ptrdiff_t>(cols * in.stride)
                                                    : next_tile - static_cast<std::ptrdiff_t>(lo0 * in.stride);
    auto first = [&](std::size_t x) { return get_in(shape.high_row(lo0, x), ahead); };
    auto ld = [&](std::size_t x) { return from_scratch(shape.high_row(lo0, x)); };
    auto st = [&](std::size_t x, Row r) { to_scratch(shape.high_row(lo0, x), r); };
    run_stages<true>(cols << shape.high_stages(), shape.cols_log2, shape.high_stages(), first, ld, st, st);
  }
  const bool low_is_first = shape.high_stages() == 0;
  const bool single_pass = shape.log2 == 4;
  for (std::size_t j0 = 0; j0 < B; j0 += chunk) {
    auto first = [&](std::size_t x) { return low_is_first ? get_in(j0 + x, next_tile) : from_scratch(j0 + x); };
    auto ld = [&](std::size_t x) { return from_scratch(j0 + x); };
    auto st = [&](std::size_t x, Row r) { to_scratch(j0 + x, r); };
    run_stages<true>(chunk, 4, shape.low_stages(), first, ld, st, st);
    // Stages h = 8..1, the signs and 1/sqrt(B), and the transpose back into the 16 blocks.
    for (std::size_t j = j0; j < j0 + chunk; j += kLanes) {
      Row r[kLanes];
      for (unsigned i = 0; i < kLanes; ++i) r[i] = single_pass ? get_in(j + i, next_tile) : from_scratch(j + i);
      butterflies<4, true>(r);
      for (unsigned i = 0; i < kLanes; ++i) r[i] = r[i] * (job.scale * job.signs[j + i]);
      transpose(r);
      for (unsigned k = 0; k < t; ++k) {
        float* dst = job.out + (b0 + k) * B + j;
        streaming ? stream(dst, r[k]) : store(dst, r[k]);
      }
    }
  }
}

template <bool Encode>
void transform_blocks(const Job& job) {
  if (job.size < kLanes) return Encode ? reference::encode_blocks(job) : reference::decode_blocks(job);
  // Non-temporal stores need whole, aligned lines: every row (encode) or block piece (decode).
  const bool aligned = reinterpret_cast<std::uintptr_t>(job.out) % 64 == 0 && (!Encode || job.blocks % kLanes == 0);
  const bool streaming = aligned && job.blocks * job.size * sizeof(float) >= kStreamingBytes;
  for (std::uint64_t b0 = 0; b0 < job.blocks; b0 += kLanes) {
    const auto t = static_cast<unsigned>(std::min<std::uint64_t>(kLanes, job.blocks - b0));
    Encode ? encode_tile(job, b0, t, streaming) : decode_tile(job, b0, t, streaming);
  }
  if (streaming) _mm_sfence();  // the stores are weakly ordered: publish them before returning
}

// One contiguous block of n floats (a piece of the ragged tail): rows are 16 consecutive
// coordinates, so stages h < 16 run within a row and the others between rows, in place in out.
template <bool Encode>
void transform_one(const float* in, float* out, std::uint32_t n, const float* signs, float scale) {
  if (n < kLanes) return Encode ? reference::encode_one(in, out, n, signs, scale) : reference::decode_one(in, out, n, signs, scale);
  const std::size_t rows = n / kLanes;
  // Encode signs the input; decode signs (and both scale) the result.
  auto finish = [&](std::size_t x, Row r) {
    return Encode ? r * scale : r * (load(signs + x * kLanes) * scale);
  };
  for (std::size_t x = 0; x < rows; ++x) {
    Row r = load(in + x * kLanes);
    if (Encode) r = r * load(signs + x * kLanes);
    r = in_row_fwht(r);
    store(out + x * kLanes, rows == 1 ? finish(x, r) : r);
  }
  auto ld = [&](std::size_t x) { return load(out + x * kLanes); };
  auto st = [&](std::size_t x, Row r) { store(out + x * kLanes, r); };
  auto last = [&](std::size_t x, Row r) { store(out + x * kLanes, finish(x, r)); };
  run_stages<false>(rows, 0, static_cast<unsigned>(std::countr_zero(rows)), ld, ld, st, last);
}

}  // namespace
}  // namespace optireduce::hadamard_detail

// Each wide translation unit stamps out its kernel table with this, after defining its Row.
#define OR_HADAMARD_SIMD_KERNELS(name)                                                            \
  namespace optireduce::hadamard_detail {                                                         \
  Kernels name() {                                                                                \
    return {&transform_blocks<true>, &transform_blocks<false>, &transform_one<true>, &transform_one<false>}; \
  }                                                                                               \
  }
