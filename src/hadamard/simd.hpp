// The wide kernels of the transform, shared by hadamard/avx2.cpp and hadamard/avx512.cpp. Each of
// them first defines, in an anonymous namespace inside optireduce::hadamard_detail, a `Row` of 16
// floats (one cache line) and its operations: load, store, stream (non-temporal, 64-byte
// aligned), load_lanes / store_lanes (the first t lanes), zero, + and -, * by a float or a Row,
// transpose (16 rows in place), in_row_fwht (the first four stages within one row), and
// kRadixLog2 (how many stages one pass keeps in registers).
//
// Layout of a sub-tile: 16 blocks side by side, "row" j = coordinate j of the 16 blocks, which is
// exactly what the interleaved encoded range stores at out[j * blocks + b0 ...]. Every butterfly
// stage is then a plain add and subtract of two rows; only the block-major side (the input of
// encode, the output of decode) needs a 16x16 transpose, fused with the stages h = 1..8. The other
// stages run as passes of up to 2^kRadixLog2 rows held in registers, over a part small enough
// for L1:
//   low stages  (h = 16..128 rows): per chunk of 256 consecutive rows (16 KiB), one pass;
//   high stages (h >= 256): per sweep over a few columns j mod 256 of every chunk.
// A tile is several sub-tiles (sub_tiles() in hadamard/kernels.hpp) that take the high stages
// together, so the interleaved side is read or written 256-512 B per row at a time. The tile
// crosses L2 once; the signs and 1/sqrt(B) ride on the first or last pass, and the encoded side
// goes straight from or to the caller's buffer (non-temporal stores when large and aligned).
// Decode runs the same passes in the opposite order (the stages commute), so it costs the same
// as encode (to rounding, not bit for bit); its strided reads are prefetched one sweep ahead.
#pragma once

#include <immintrin.h>

#include <algorithm>
#include <bit>
#include <cstddef>
#include <cstdint>

#include "optireduce/hadamard/kernels.hpp"

namespace optireduce::hadamard_detail {
namespace {

constexpr std::uint32_t kLanes = 16;       // floats per Row = blocks per sub-tile
constexpr unsigned kChunkLog2 = 8;         // rows of a chunk: 256 x 64 B = 16 KiB; stages 4..7 = one pass
constexpr unsigned kL1RowsLog2 = 9;        // rows a high-stage sweep may touch
// Beyond this much output, writing it around the caches saves reading it in first.
constexpr std::uint64_t kStreamingBytes = std::uint64_t{8} << 20;
// How far ahead encode fetches each of its 16 input streams.
constexpr std::ptrdiff_t kPrefetchFloats = 8 * kLanes;

static_assert(kLanes == kTile);

// Stages of 2^M rows held in registers; Descending runs them from the widest down.
template <unsigned M, bool Descending>
OR_INLINE void butterflies(Row (&r)[1u << M]) {
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

// A set of rows named x = 0..count-1 inside some buffer: x = low + (high << low_bits) lives at
// base + low * low_stride + high * high_stride floats. Rows x and x + 2^a are then a constant
// distance apart, so a pass computes one address per group.
// `subs` side-by-side sub-tiles, sub_stride floats apart, go through each group together.
struct Rows {
  float* base;
  unsigned low_bits;
  std::ptrdiff_t low_stride, high_stride;
  std::ptrdiff_t sub_stride = 0;
  float* at(std::size_t x) const {
    const std::size_t low = x & ((std::size_t{1} << low_bits) - 1), high = x >> low_bits;
    return base + static_cast<std::ptrdiff_t>(low) * low_stride + static_cast<std::ptrdiff_t>(high) * high_stride;
  }
  // Valid for 2^a below 2^low_bits or a multiple of it, as every stage of a set is.
  std::ptrdiff_t step(unsigned a) const { return a < low_bits ? low_stride << a : high_stride << (a - low_bits); }
};

constexpr auto plain_load = [](const float* p) { return load(p); };
constexpr auto plain_store = [](float* p, Row r) { store(p, r); };

// Stages [a, a + M) over `count` rows: rows x + i 2^a form one group, read from `src` through
// get(pointer) and written to `dst` through put(pointer, row).
template <unsigned M, bool Descending, class Get, class Put>
void radix_pass(std::size_t count, unsigned subs, unsigned a, Rows src, Get get, Rows dst, Put put) {
  const std::size_t h = std::size_t{1} << a, span = h << M;
  const std::ptrdiff_t src_step = src.step(a), dst_step = dst.step(a);
  for (std::size_t g = 0; g < count; g += span)
    for (std::size_t x = g; x < g + h; ++x)
    for (unsigned sub = 0; sub < subs; ++sub) {
      const float* from = src.at(x) + sub * src.sub_stride;
      float* to = dst.at(x) + sub * dst.sub_stride;
      Row r[1u << M];
#pragma GCC unroll 16
      for (unsigned i = 0; i < (1u << M); ++i) r[i] = get(from + i * src_step);
      butterflies<M, Descending>(r);
#pragma GCC unroll 16
      for (unsigned i = 0; i < (1u << M); ++i) put(to + i * dst_step, r[i]);
    }
}

// Stages [lowest, lowest + stages) of a set of rows kept in `mid`, as few register passes as
// possible, of balanced sizes. The first pass reads `first` through get, the last writes `last`
// through put.
template <bool Descending, class Get, class Put>
void run_stages(std::size_t count, unsigned subs, unsigned lowest, unsigned stages, Rows first, Get get, Rows mid, Rows last,
                Put put) {
  const unsigned passes = (stages + kRadixLog2 - 1) / kRadixLog2;
  unsigned done = 0;
  for (unsigned p = 0; p < passes; ++p) {
    const unsigned m = (stages - done + (passes - p) - 1) / (passes - p);
    const unsigned a = Descending ? lowest + stages - done - m : lowest + done;
    auto pass = [&](Rows src, auto ld, Rows dst, auto st) {
      switch (m) {
        case 1: radix_pass<1, Descending>(count, subs, a, src, ld, dst, st); break;
        case 2: radix_pass<2, Descending>(count, subs, a, src, ld, dst, st); break;
        case 3: radix_pass<3, Descending>(count, subs, a, src, ld, dst, st); break;
        default:
          if constexpr (kRadixLog2 >= 4) radix_pass<4, Descending>(count, subs, a, src, ld, dst, st);
          break;
      }
    };
    const bool is_first = p == 0, is_last = p + 1 == passes;
    if (is_first && is_last) pass(first, get, last, put);
    else if (is_first) pass(first, get, mid, plain_store);
    else if (is_last) pass(mid, plain_load, last, put);
    else pass(mid, plain_load, mid, plain_store);
    done += m;
  }
}

// The split of a tile's stages and where its rows live meanwhile. A tile is `subs` sub-tiles of
// 16 blocks, each with its own rows in the scratch; they go through the high stages together, so
// that the interleaved side is touched 64 x subs bytes at a time.
struct TileShape {
  unsigned log2;        // L: B = 2^L
  unsigned subs;        // sub-tiles of kLanes blocks
  unsigned chunk_log2;  // c: rows per chunk (low stages 4..c-1)
  unsigned cols_log2;   // columns per high-stage sweep (high stages c..L-1)
  TileShape(std::uint32_t B, unsigned sub_tiles)
      : log2(static_cast<unsigned>(std::countr_zero(B))),
        subs(sub_tiles),
        chunk_log2(std::min(log2, kChunkLog2)),
        cols_log2(sweep_cols_log2(log2 - chunk_log2 + static_cast<unsigned>(std::countr_zero(sub_tiles)), chunk_log2)) {}
  // As many columns as keep a sweep within kL1RowsLog2 rows, at least one, at most a chunk.
  static unsigned sweep_cols_log2(unsigned rows_log2, unsigned chunk_log2) {
    return std::min(chunk_log2, rows_log2 >= kL1RowsLog2 ? 0u : kL1RowsLog2 - rows_log2);
  }
  std::size_t chunk() const { return std::size_t{1} << chunk_log2; }
  std::size_t cols() const { return std::size_t{1} << cols_log2; }
  unsigned low_stages() const { return chunk_log2 - 4; }
  unsigned high_stages() const { return log2 - chunk_log2; }
  std::size_t sweep_rows() const { return cols() << high_stages(); }
  // In the scratch, one padding row per chunk, so that the rows of a high-stage group (one per
  // chunk) do not all map to the same L1 set.
  std::ptrdiff_t scratch_index(std::size_t j) const { return static_cast<std::ptrdiff_t>(j + (j >> chunk_log2)); }
  std::ptrdiff_t sub_floats() const { return scratch_index(std::size_t{1} << log2) * kLanes + kLanes; }
  // Chunk rows j0.. of a buffer whose row j is at base + j * stride.
  Rows chunk_rows(float* base, std::size_t j0, std::ptrdiff_t stride) const {
    return {base + static_cast<std::ptrdiff_t>(j0) * stride, chunk_log2, stride, 0, kLanes};
  }
  Rows scratch_chunk(float* scratch, unsigned sub, std::size_t j0) const {
    return {scratch + sub * sub_floats() + scratch_index(j0) * kLanes, chunk_log2, kLanes, 0, sub_floats()};
  }
  // The sweep at columns lo0..lo0 + cols - 1 of every chunk: x = column + (chunk << cols_log2).
  Rows sweep_rows(float* base, std::size_t lo0, std::ptrdiff_t stride) const {
    return {base + static_cast<std::ptrdiff_t>(lo0) * stride, cols_log2, stride, stride << chunk_log2, kLanes};
  }
  Rows scratch_sweep(float* scratch, std::size_t lo0) const {
    return {scratch + scratch_index(lo0) * kLanes, cols_log2, kLanes, static_cast<std::ptrdiff_t>(chunk() + 1) * kLanes,
            sub_floats()};
  }
};

// How a tile touches the caller's buffer: Full = all its blocks exist (else it is one sub-tile
// with t blocks: only the first t lanes or blocks), Streaming = non-temporal stores.
// Compile-time, so no test per row.
template <bool Full, bool Streaming>
struct Sink {
  unsigned t;
  OR_INLINE unsigned blocks() const { return Full ? kLanes : t; }
  OR_INLINE Row get(const float* p) const {
    if constexpr (Full) return load(p);
    else return load_lanes(p, t);
  }
  OR_INLINE void put(float* p, Row r) const {
    if constexpr (!Full) store_lanes(p, r, t);
    else if constexpr (Streaming) stream(p, r);
    else store(p, r);
  }
  OR_INLINE void put_whole(float* p, Row r) const {  // a whole row even in a partial tile
    if constexpr (Streaming) stream(p, r);
    else store(p, r);
  }
};

template <class TileSink>
void encode_tile(const Job& job, std::uint64_t b0, unsigned subs, TileSink sink) {
  const std::uint32_t B = job.size;
  const TileShape shape(B, subs);
  float* const S = job.scratch;
  float* const out = job.out + b0;
  const auto stride = static_cast<std::ptrdiff_t>(job.blocks);
  const float scale = job.scale;
  auto put_out = [sink, scale](float* p, Row r) { sink.put(p, r * scale); };

  const std::size_t chunk = shape.chunk();
  // Transpose 16 coordinates of 16 blocks into rows, with the signs and stages h = 1..8.
  auto first_pass = [&](const float* in, std::size_t j0, Rows dst, auto put) {
    for (std::size_t j = j0; j < j0 + chunk; j += kLanes) {
      Row r[kLanes];
      const float* src = in + j;
#pragma GCC unroll 16
      for (unsigned k = 0; k < kLanes; ++k) {
        r[k] = k < sink.blocks() ? load(src + k * B) : zero();
        _mm_prefetch(reinterpret_cast<const char*>(src + k * B + kPrefetchFloats), _MM_HINT_T0);
      }
      transpose(r);
#pragma GCC unroll 16
      for (unsigned i = 0; i < kLanes; ++i) r[i] = r[i] * job.signs[j + i];
      butterflies<4, false>(r);
      float* to = dst.at(j - j0);
#pragma GCC unroll 16
      for (unsigned i = 0; i < kLanes; ++i) put(to + i * dst.low_stride, r[i]);
    }
  };
  for (unsigned sub = 0; sub < subs; ++sub) {
    const float* in = job.in + (b0 + sub * kLanes) * B;
    if (shape.log2 == 4) {
      first_pass(in, 0, shape.chunk_rows(out + sub * kLanes, 0, stride), put_out);
      continue;
    }
    for (std::size_t j0 = 0; j0 < B; j0 += chunk) {
      const Rows scratch = shape.scratch_chunk(S, sub, j0);
      first_pass(in, j0, scratch, plain_store);
      if (shape.high_stages() == 0)
        run_stages<false>(chunk, 1, 4, shape.low_stages(), scratch, plain_load, scratch,
                          shape.chunk_rows(out + sub * kLanes, j0, stride), put_out);
      else
        run_stages<false>(chunk, 1, 4, shape.low_stages(), scratch, plain_load, scratch, scratch, plain_store);
    }
  }
  // The sweeps gather a few rows of every chunk, from L2 or beyond: each first read of a row
  // fetches the same row of the next sweep.
  const auto next_sweep = static_cast<std::ptrdiff_t>(shape.cols() * kLanes);
  auto get_ahead = [next_sweep](const float* p) {
    _mm_prefetch(reinterpret_cast<const char*>(p + next_sweep), _MM_HINT_T0);
    return load(p);
  };
  for (std::size_t lo0 = 0; shape.high_stages() && lo0 < chunk; lo0 += shape.cols()) {
    const Rows scratch = shape.scratch_sweep(S, lo0);
    run_stages<false>(shape.sweep_rows(), subs, shape.cols_log2, shape.high_stages(), scratch, get_ahead, scratch,
                      shape.sweep_rows(out, lo0, stride), put_out);
  }
}

template <class TileSink>
void decode_tile(const Job& job, std::uint64_t b0, unsigned subs, TileSink sink) {
  const std::uint32_t B = job.size;
  const TileShape shape(B, subs);
  float* const S = job.scratch;
  float* const in = const_cast<float*>(job.in) + b0;  // only read
  const auto stride = static_cast<std::ptrdiff_t>(job.blocks);
  // The encoded rows are `blocks` floats apart, beyond the hardware prefetchers' reach: each
  // first read of a row fetches the same row of the next sweep (`ahead` floats on).
  auto get_in = [sink](std::ptrdiff_t ahead) {
    return [sink, ahead](const float* p) {
      _mm_prefetch(reinterpret_cast<const char*>(p + ahead), _MM_HINT_T0);
      return sink.get(p);
    };
  };
  const auto next_tile = static_cast<std::ptrdiff_t>(subs * kLanes);

  const std::size_t chunk = shape.chunk();
  for (std::size_t lo0 = 0; shape.high_stages() && lo0 < chunk; lo0 += shape.cols()) {
    const auto ahead = lo0 + shape.cols() < chunk ? static_cast<std::ptrdiff_t>(shape.cols()) * stride
                                                  : next_tile - static_cast<std::ptrdiff_t>(lo0) * stride;
    const Rows scratch = shape.scratch_sweep(S, lo0);
    run_stages<true>(shape.sweep_rows(), subs, shape.cols_log2, shape.high_stages(), shape.sweep_rows(in, lo0, stride),
                     get_in(ahead), scratch, scratch, plain_store);
  }
  // Stages h = 8..1, the signs and 1/sqrt(B), and the transpose back into 16 blocks.
  auto last_pass = [&](float* out, std::size_t j0, Rows src, auto get) {
    for (std::size_t j = j0; j < j0 + chunk; j += kLanes) {
      Row r[kLanes];
      const float* from = src.at(j - j0);
#pragma GCC unroll 16
      for (unsigned i = 0; i < kLanes; ++i) r[i] = get(from + i * src.low_stride);
      butterflies<4, true>(r);
#pragma GCC unroll 16
      for (unsigned i = 0; i < kLanes; ++i) r[i] = r[i] * (job.scale * job.signs[j + i]);
      transpose(r);
      float* dst = out + j;
#pragma GCC unroll 16
      for (unsigned k = 0; k < kLanes; ++k)
        if (k < sink.blocks()) sink.put_whole(dst + k * B, r[k]);
    }
  };
  for (unsigned sub = 0; sub < subs; ++sub) {
    float* const out = job.out + (b0 + sub * kLanes) * B;
    if (shape.log2 == 4) {
      last_pass(out, 0, shape.chunk_rows(in + sub * kLanes, 0, stride), get_in(next_tile));
      continue;
    }
    for (std::size_t j0 = 0; j0 < B; j0 += chunk) {
      const Rows scratch = shape.scratch_chunk(S, sub, j0);
      if (shape.high_stages() == 0)
        run_stages<true>(chunk, 1, 4, shape.low_stages(), shape.chunk_rows(in + sub * kLanes, j0, stride),
                         get_in(next_tile), scratch, scratch, plain_store);
      else
        run_stages<true>(chunk, 1, 4, shape.low_stages(), scratch, plain_load, scratch, scratch, plain_store);
      last_pass(out, j0, scratch, plain_load);
    }
  }
}

template <bool Encode>
void transform_blocks(const Job& job) {
  if (job.size < kLanes) return Encode ? reference::encode_blocks(job) : reference::decode_blocks(job);
  // Non-temporal stores need whole, aligned lines: every row (encode) or block piece (decode).
  const bool aligned = reinterpret_cast<std::uintptr_t>(job.out) % 64 == 0 && (!Encode || job.blocks % kLanes == 0);
  const bool streaming = aligned && job.blocks * job.size * sizeof(float) >= kStreamingBytes;
  auto tile = [&](std::uint64_t b0, unsigned subs, auto sink) {
    Encode ? encode_tile(job, b0, subs, sink) : decode_tile(job, b0, subs, sink);
  };
  // Wide tiles, then single sub-tiles, then the last few blocks.
  auto full_tiles = [&](auto sink) {
    std::uint64_t b0 = 0;
    const unsigned subs = sub_tiles(job.size);
    for (; b0 + subs * kLanes <= job.blocks; b0 += subs * kLanes) tile(b0, subs, sink);
    for (; b0 + kLanes <= job.blocks; b0 += kLanes) tile(b0, 1, sink);
  };
  if (streaming) full_tiles(Sink<true, true>{kLanes});
  else full_tiles(Sink<true, false>{kLanes});
  if (const auto t = static_cast<unsigned>(job.blocks % kLanes)) tile(job.blocks - t, 1, Sink<false, false>{t});
  if (streaming) _mm_sfence();  // the stores are weakly ordered: publish them before returning
}

// One contiguous block of n floats (a piece of the ragged tail): rows are 16 consecutive
// coordinates, so stages h < 16 run within a row and the others between rows, in place in out.
template <bool Encode>
void transform_one(const float* in, float* out, std::uint32_t n, const float* signs, float scale) {
  if (n < kLanes) return Encode ? reference::encode_one(in, out, n, signs, scale) : reference::decode_one(in, out, n, signs, scale);
  const std::size_t rows = n / kLanes;
  // Encode signs the input; decode signs (and both scale) the result.
  auto finish = [signs, scale, out](float* p, Row r) {
    store(p, Encode ? r * scale : r * (load(signs + (p - out)) * scale));
  };
  for (std::size_t x = 0; x < rows; ++x) {
    Row r = load(in + x * kLanes);
    if (Encode) r = r * load(signs + x * kLanes);
    r = in_row_fwht(r);
    rows == 1 ? finish(out, r) : store(out + x * kLanes, r);
  }
  const auto log2_rows = static_cast<unsigned>(std::countr_zero(rows));
  const Rows all{out, log2_rows, kLanes, 0};
  run_stages<false>(rows, 1, 0, log2_rows, all, plain_load, all, all, finish);
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
