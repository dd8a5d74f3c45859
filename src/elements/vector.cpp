// The conversions of the two vector levels, one source compiled once per level, each time with
// that level's flags and width (CMakeLists.txt): OPTIREDUCE_VECTOR_LANES 8 elements per vector
// for AVX2 + F16C, 16 for AVX-512. float16 goes through the level's vcvtph2ps / vcvtps2ph (round
// to nearest even, whatever MXCSR says); bfloat16 stays integer arithmetic (zero-extended and
// shifted to widen; AVX512_BF16's vcvtneps2bf16 flushes subnormals, which the scalar reference
// keeps).
#include <immintrin.h>

#include "optireduce/elements/kernels.hpp"

#if OPTIREDUCE_VECTOR_LANES == 16 && !(defined(__AVX512F__) && defined(__AVX512BW__))
#error "16 lanes need the AVX-512 flags (elements/CMakeLists.txt)"
#elif OPTIREDUCE_VECTOR_LANES == 8 && !(defined(__AVX2__) && defined(__F16C__))
#error "8 lanes need the AVX2 and F16C flags (elements/CMakeLists.txt)"
#elif OPTIREDUCE_VECTOR_LANES != 8 && OPTIREDUCE_VECTOR_LANES != 16
#error "OPTIREDUCE_VECTOR_LANES: 8 or 16"
#endif

namespace optireduce::elements_detail {
namespace {

#if OPTIREDUCE_VECTOR_LANES == 16
__m512 half_to_float_lanes(__m256i h) { return _mm512_cvtph_ps(h); }
__m256i float_to_half_lanes(__m512 v) { return _mm512_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT); }
__m512 bfloat_to_float_lanes(__m256i h) { return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16)); }
#else
__m256 half_to_float_lanes(__m128i h) { return _mm256_cvtph_ps(h); }
__m128i float_to_half_lanes(__m256 v) { return _mm256_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT); }
__m256 bfloat_to_float_lanes(__m128i h) { return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16)); }
#endif

}  // namespace

template <>
Kernels vector_kernels<OPTIREDUCE_VECTOR_LANES>() {
  return kernels_of<VectorLanes<OPTIREDUCE_VECTOR_LANES, half_to_float_lanes, float_to_half_lanes, bfloat_to_float_lanes>>();
}

}  // namespace optireduce::elements_detail
