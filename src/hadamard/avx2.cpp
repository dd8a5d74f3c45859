// The transform's kernels built for the avx2 level (flags in CMakeLists.txt): a Row is two ymm.
#include <immintrin.h>

#include <cstdint>

#include "optireduce/hadamard/kernels.hpp"

namespace optireduce::hadamard_detail {
namespace {

struct Row {
  __m256 lo, hi;  // lanes 0-7, 8-15
};

constexpr unsigned kRadixLog2 = 3;  // 8 rows = 16 registers, all of them

OR_INLINE Row load(const float* p) { return {_mm256_loadu_ps(p), _mm256_loadu_ps(p + 8)}; }
OR_INLINE void store(float* p, Row r) {
  _mm256_storeu_ps(p, r.lo);
  _mm256_storeu_ps(p + 8, r.hi);
}
OR_INLINE void stream(float* p, Row r) {
  _mm256_stream_ps(p, r.lo);
  _mm256_stream_ps(p + 8, r.hi);
}
// Lane i of the mask is on when i < t.
OR_INLINE __m256i first_lanes(int t) { return _mm256_cmpgt_epi32(_mm256_set1_epi32(t), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7)); }
OR_INLINE Row load_lanes(const float* p, unsigned t) {
  const int n = static_cast<int>(t);
  return {_mm256_maskload_ps(p, first_lanes(n)), _mm256_maskload_ps(p + 8, first_lanes(n - 8))};
}
OR_INLINE void store_lanes(float* p, Row r, unsigned t) {
  const int n = static_cast<int>(t);
  _mm256_maskstore_ps(p, first_lanes(n), r.lo);
  _mm256_maskstore_ps(p + 8, first_lanes(n - 8), r.hi);
}
OR_INLINE Row zero() { return {_mm256_setzero_ps(), _mm256_setzero_ps()}; }
OR_INLINE Row operator+(Row a, Row b) { return {_mm256_add_ps(a.lo, b.lo), _mm256_add_ps(a.hi, b.hi)}; }
OR_INLINE Row operator-(Row a, Row b) { return {_mm256_sub_ps(a.lo, b.lo), _mm256_sub_ps(a.hi, b.hi)}; }
OR_INLINE Row operator*(Row a, Row b) { return {_mm256_mul_ps(a.lo, b.lo), _mm256_mul_ps(a.hi, b.hi)}; }
OR_INLINE Row operator*(Row a, float s) {
  const __m256 v = _mm256_set1_ps(s);
  return {_mm256_mul_ps(a.lo, v), _mm256_mul_ps(a.hi, v)};
}

// v[i] lane k <- v[k] lane i, for 8 ymm.
OR_INLINE void transpose8(__m256 (&v)[8]) {
  __m256 t[8], s[8];
  for (int i = 0; i < 8; i += 2) {
    t[i] = _mm256_unpacklo_ps(v[i], v[i + 1]);
    t[i + 1] = _mm256_unpackhi_ps(v[i], v[i + 1]);
  }
  for (int g = 0; g < 8; g += 4) {
    s[g] = _mm256_shuffle_ps(t[g], t[g + 2], _MM_SHUFFLE(1, 0, 1, 0));
    s[g + 1] = _mm256_shuffle_ps(t[g], t[g + 2], _MM_SHUFFLE(3, 2, 3, 2));
    s[g + 2] = _mm256_shuffle_ps(t[g + 1], t[g + 3], _MM_SHUFFLE(1, 0, 1, 0));
    s[g + 3] = _mm256_shuffle_ps(t[g + 1], t[g + 3], _MM_SHUFFLE(3, 2, 3, 2));
  }
  for (int i = 0; i < 4; ++i) {
    v[i] = _mm256_permute2f128_ps(s[i], s[i + 4], 0x20);
    v[i + 4] = _mm256_permute2f128_ps(s[i], s[i + 4], 0x31);
  }
}

// r[i] lane k <- r[k] lane i: four 8x8 transposes, one per quarter.
OR_INLINE void transpose(Row (&r)[16]) {
  __m256 q[4][8];  // rows 0-7 lo, rows 8-15 lo, rows 0-7 hi, rows 8-15 hi
  for (int i = 0; i < 8; ++i) {
    q[0][i] = r[i].lo;
    q[1][i] = r[i + 8].lo;
    q[2][i] = r[i].hi;
    q[3][i] = r[i + 8].hi;
  }
  for (auto& quarter : q) transpose8(quarter);
  for (int i = 0; i < 8; ++i) {
    r[i] = {q[0][i], q[1][i]};
    r[i + 8] = {q[2][i], q[3][i]};
  }
}

// Stages h = 1, 2, 4 within each half (x * (±1) + partner, see the avx512 kernels), then h = 8
// between the halves.
OR_INLINE Row in_row_fwht(Row r) {
  const __m256 s1 = _mm256_setr_ps(1, -1, 1, -1, 1, -1, 1, -1);
  const __m256 s2 = _mm256_setr_ps(1, 1, -1, -1, 1, 1, -1, -1);
  const __m256 s4 = _mm256_setr_ps(1, 1, 1, 1, -1, -1, -1, -1);
  auto half = [&](__m256 x) {
    x = _mm256_fmadd_ps(x, s1, _mm256_permute_ps(x, _MM_SHUFFLE(2, 3, 0, 1)));
    x = _mm256_fmadd_ps(x, s2, _mm256_permute_ps(x, _MM_SHUFFLE(1, 0, 3, 2)));
    return _mm256_fmadd_ps(x, s4, _mm256_permute2f128_ps(x, x, 0x01));
  };
  const __m256 lo = half(r.lo), hi = half(r.hi);
  return {_mm256_add_ps(lo, hi), _mm256_sub_ps(lo, hi)};
}

}  // namespace
}  // namespace optireduce::hadamard_detail

#include "optireduce/hadamard/simd.hpp"

OR_HADAMARD_SIMD_KERNELS(avx2_kernels)
