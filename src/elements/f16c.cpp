// The conversions built for AVX2 + F16C (flags in CMakeLists.txt): eight elements per vector.
// float16 by F16C's vcvtph2ps / vcvtps2ph (round to nearest even, whatever MXCSR says);
// bfloat16 by integer arithmetic, as the scalar reference does.
#include <immintrin.h>

#include "optireduce/elements/kernels.hpp"

namespace optireduce::elements_detail {
namespace {

inline __m256i bfloat16_round(__m256i u) {
  const __m256i lsb = _mm256_and_si256(_mm256_srli_epi32(u, 16), _mm256_set1_epi32(1));
  const __m256i rounded = _mm256_srli_epi32(_mm256_add_epi32(_mm256_add_epi32(u, _mm256_set1_epi32(0x7FFF)), lsb), 16);
  const __m256i magnitude = _mm256_and_si256(u, _mm256_set1_epi32(0x7FFFFFFF));
  const __m256i nan = _mm256_cmpgt_epi32(magnitude, _mm256_set1_epi32(0x7F800000));
  const __m256i quieted = _mm256_or_si256(_mm256_srli_epi32(u, 16), _mm256_set1_epi32(0x40));
  return _mm256_blendv_epi8(rounded, quieted, nan);
}

struct F16cLanes {
  static std::size_t widen(ElementFormat f, const void* in, float* out, std::size_t n) {
    const auto* src = static_cast<const std::byte*>(in);
    std::size_t i = 0;
    for (; i + 8 <= n; i += 8) {
      const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + 2 * i));
      const __m256 v = f == ElementFormat::float16 ? _mm256_cvtph_ps(h)
                                                   : _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
      _mm256_storeu_ps(out + i, v);
    }
    return i;
  }
  static std::size_t narrow(ElementFormat f, const float* in, void* out, std::size_t n) {
    auto* dst = static_cast<std::byte*>(out);
    std::size_t i = 0;
    for (; i + 8 <= n; i += 8) {
      const __m256 v = _mm256_loadu_ps(in + i);
      __m128i h;
      if (f == ElementFormat::float16) {
        h = _mm256_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT);
      } else {
        const __m256i r = bfloat16_round(_mm256_castps_si256(v));
        // packus works per 128-bit lane: lanes 0-3 and 4-7 land in the low quarters of each half.
        h = _mm256_castsi256_si128(_mm256_permute4x64_epi64(_mm256_packus_epi32(r, r), 0x08));
      }
      _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + 2 * i), h);
    }
    return i;
  }
};

}  // namespace

Kernels f16c_kernels() { return kernels_of<F16cLanes>(); }

}  // namespace optireduce::elements_detail
