// The conversions built for AVX-512 (flags in CMakeLists.txt): sixteen elements per vector;
// float16 by vcvtph2ps / vcvtps2ph. bfloat16 stays integer arithmetic (AVX512_BF16's
// vcvtneps2bf16 flushes subnormals, which the scalar reference keeps).
#include <immintrin.h>

#include "optireduce/elements/kernels.hpp"

namespace optireduce::elements_detail {
namespace {

__m512 half_to_float16(__m256i h) { return _mm512_cvtph_ps(h); }
__m256i float_to_half16(__m512 v) { return _mm512_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT); }

}  // namespace

Kernels avx512_kernels() { return kernels_of<VectorLanes<16, half_to_float16, float_to_half16>>(); }

}  // namespace optireduce::elements_detail
