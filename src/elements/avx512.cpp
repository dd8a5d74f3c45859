// The conversions built for AVX-512 (flags in CMakeLists.txt): sixteen elements per vector.
// float16 by vcvtph2ps / vcvtps2ph; bfloat16 by integer arithmetic (AVX512_BF16's vcvtneps2bf16
// flushes subnormals, which the scalar reference keeps).
#include <immintrin.h>

#include "optireduce/elements/kernels.hpp"

namespace optireduce::elements_detail {
namespace {

inline __m512i bfloat16_round(__m512i u) {
  const __m512i lsb = _mm512_and_si512(_mm512_srli_epi32(u, 16), _mm512_set1_epi32(1));
  const __m512i rounded = _mm512_srli_epi32(_mm512_add_epi32(_mm512_add_epi32(u, _mm512_set1_epi32(0x7FFF)), lsb), 16);
  const __m512i magnitude = _mm512_and_si512(u, _mm512_set1_epi32(0x7FFFFFFF));
  const __mmask16 nan = _mm512_cmpgt_epi32_mask(magnitude, _mm512_set1_epi32(0x7F800000));
  const __m512i quieted = _mm512_or_si512(_mm512_srli_epi32(u, 16), _mm512_set1_epi32(0x40));
  return _mm512_mask_blend_epi32(nan, rounded, quieted);
}

struct Avx512Lanes {
  static std::size_t widen(ElementFormat f, const void* in, float* out, std::size_t n) {
    const auto* src = static_cast<const std::byte*>(in);
    std::size_t i = 0;
    for (; i + 16 <= n; i += 16) {
      const __m256i h = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(src + 2 * i));
      const __m512 v = f == ElementFormat::float16 ? _mm512_cvtph_ps(h)
                                                   : _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
      _mm512_storeu_ps(out + i, v);
    }
    return i;
  }
  static std::size_t narrow(ElementFormat f, const float* in, void* out, std::size_t n) {
    auto* dst = static_cast<std::byte*>(out);
    std::size_t i = 0;
    for (; i + 16 <= n; i += 16) {
      const __m512 v = _mm512_loadu_ps(in + i);
      const __m256i h = f == ElementFormat::float16 ? _mm512_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT)
                                                    : _mm512_cvtepi32_epi16(bfloat16_round(_mm512_castps_si512(v)));
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst + 2 * i), h);
    }
    return i;
  }
};

}  // namespace

Kernels avx512_kernels() { return kernels_of<Avx512Lanes>(); }

}  // namespace optireduce::elements_detail
