// The conversions built for AVX2 + F16C (flags in CMakeLists.txt): eight elements per vector;
// float16 by F16C's vcvtph2ps / vcvtps2ph (round to nearest even, whatever MXCSR says).
#include <immintrin.h>

#include "optireduce/elements/kernels.hpp"

namespace optireduce::elements_detail {
namespace {

__m256 half_to_float8(__m128i h) { return _mm256_cvtph_ps(h); }
__m128i float_to_half8(__m256 v) { return _mm256_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT); }
__m256 bfloat_to_float8(__m128i h) { return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16)); }

}  // namespace

Kernels f16c_kernels() { return kernels_of<VectorLanes<8, half_to_float8, float_to_half8, bfloat_to_float8>>(); }

}  // namespace optireduce::elements_detail
