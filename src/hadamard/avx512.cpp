// The transform's kernels built for the avx512 level (flags in CMakeLists.txt): a Row is one zmm.
#include <immintrin.h>

#include <cstdint>

#include "optireduce/hadamard/kernels.hpp"

// GCC 12 flags the _mm512_undefined_ps() inside its own shuffle intrinsics (GCC bug 105593).
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"

namespace optireduce::hadamard_detail {
namespace {

struct Row {
  __m512 v;
};

constexpr unsigned kRadixLog2 = 4;  // 16 rows in registers, of 32

OR_INLINE Row load(const float* p) { return {_mm512_loadu_ps(p)}; }
OR_INLINE void store(float* p, Row r) { _mm512_storeu_ps(p, r.v); }
OR_INLINE void stream(float* p, Row r) { _mm512_stream_ps(p, r.v); }
OR_INLINE Row load_lanes(const float* p, unsigned t) {
  return {_mm512_maskz_loadu_ps(static_cast<__mmask16>((1u << t) - 1), p)};
}
OR_INLINE void store_lanes(float* p, Row r, unsigned t) {
  _mm512_mask_storeu_ps(p, static_cast<__mmask16>((1u << t) - 1), r.v);
}
OR_INLINE Row zero() { return {_mm512_setzero_ps()}; }
OR_INLINE Row operator+(Row a, Row b) { return {_mm512_add_ps(a.v, b.v)}; }
OR_INLINE Row operator-(Row a, Row b) { return {_mm512_sub_ps(a.v, b.v)}; }
OR_INLINE Row operator*(Row a, Row b) { return {_mm512_mul_ps(a.v, b.v)}; }
OR_INLINE Row operator*(Row a, float s) { return {_mm512_mul_ps(a.v, _mm512_set1_ps(s))}; }

// r[i] lane k <- r[k] lane i: 4 rounds of 16 shuffles.
OR_INLINE void transpose(Row (&r)[16]) {
  __m512 a[16], b[16];
  for (int i = 0; i < 16; i += 2) {
    a[i] = _mm512_unpacklo_ps(r[i].v, r[i + 1].v);
    a[i + 1] = _mm512_unpackhi_ps(r[i].v, r[i + 1].v);
  }
  // b[4g + m], 128-bit lane q: rows 4g..4g+3 of column 4q + m.
  for (int g = 0; g < 16; g += 4) {
    b[g] = _mm512_castpd_ps(_mm512_unpacklo_pd(_mm512_castps_pd(a[g]), _mm512_castps_pd(a[g + 2])));
    b[g + 1] = _mm512_castpd_ps(_mm512_unpackhi_pd(_mm512_castps_pd(a[g]), _mm512_castps_pd(a[g + 2])));
    b[g + 2] = _mm512_castpd_ps(_mm512_unpacklo_pd(_mm512_castps_pd(a[g + 1]), _mm512_castps_pd(a[g + 3])));
    b[g + 3] = _mm512_castpd_ps(_mm512_unpackhi_pd(_mm512_castps_pd(a[g + 1]), _mm512_castps_pd(a[g + 3])));
  }
  for (int m = 0; m < 4; ++m) {
    a[m] = _mm512_shuffle_f32x4(b[m], b[4 + m], 0x88);
    a[m + 4] = _mm512_shuffle_f32x4(b[m], b[4 + m], 0xDD);
    a[m + 8] = _mm512_shuffle_f32x4(b[8 + m], b[12 + m], 0x88);
    a[m + 12] = _mm512_shuffle_f32x4(b[8 + m], b[12 + m], 0xDD);
  }
  for (int m = 0; m < 4; ++m) {
    r[m].v = _mm512_shuffle_f32x4(a[m], a[m + 8], 0x88);
    r[m + 8].v = _mm512_shuffle_f32x4(a[m], a[m + 8], 0xDD);
    r[m + 4].v = _mm512_shuffle_f32x4(a[m + 4], a[m + 12], 0x88);
    r[m + 12].v = _mm512_shuffle_f32x4(a[m + 4], a[m + 12], 0xDD);
  }
}

// Stages h = 1, 2, 4, 8 within a row: lane j takes partner j ^ h, then x * (±1) + partner gives
// x_j + x_{j+h} in the low lanes and x_{j-h} - x_j in the high ones (one rounding, as a + b).
OR_INLINE Row in_row_fwht(Row r) {
  const __m512 s1 = _mm512_setr_ps(1, -1, 1, -1, 1, -1, 1, -1, 1, -1, 1, -1, 1, -1, 1, -1);
  const __m512 s2 = _mm512_setr_ps(1, 1, -1, -1, 1, 1, -1, -1, 1, 1, -1, -1, 1, 1, -1, -1);
  const __m512 s4 = _mm512_setr_ps(1, 1, 1, 1, -1, -1, -1, -1, 1, 1, 1, 1, -1, -1, -1, -1);
  const __m512 s8 = _mm512_setr_ps(1, 1, 1, 1, 1, 1, 1, 1, -1, -1, -1, -1, -1, -1, -1, -1);
  __m512 x = r.v;
  x = _mm512_fmadd_ps(x, s1, _mm512_permute_ps(x, _MM_SHUFFLE(2, 3, 0, 1)));
  x = _mm512_fmadd_ps(x, s2, _mm512_permute_ps(x, _MM_SHUFFLE(1, 0, 3, 2)));
  x = _mm512_fmadd_ps(x, s4, _mm512_shuffle_f32x4(x, x, _MM_SHUFFLE(2, 3, 0, 1)));
  x = _mm512_fmadd_ps(x, s8, _mm512_shuffle_f32x4(x, x, _MM_SHUFFLE(1, 0, 3, 2)));
  return {x};
}

}  // namespace
}  // namespace optireduce::hadamard_detail

#include "optireduce/hadamard/simd.hpp"

OR_HADAMARD_SIMD_KERNELS(avx512_kernels)
