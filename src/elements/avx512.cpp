// The conversions built for AVX-512 (flags in CMakeLists.txt): sixteen elements per vector;
// float16 by vcvtph2ps / vcvtps2ph. bfloat16 stays integer arithmetic (AVX512_BF16's
// vcvtneps2bf16 flushes subnormals, which the scalar reference keeps).
#include <immintrin.h>

#include "optireduce/elements/kernels.hpp"

namespace optireduce::elements_detail {
namespace {

__m512 half_to_float16(__m256i h) { return _mm512_cvtph_ps(h); }
__m256i float_to_half16(__m512 v) { return _mm512_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT); }
__m512 bfloat_to_float16(__m256i h) { return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16)); }

}  // namespace

Kernels avx512_kernels() { return kernels_of<VectorLanes<16, half_to_float16, float_to_half16, bfloat_to_float16>>(); }

}  // namespace optireduce::elements_detail
