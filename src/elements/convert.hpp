// Conversions between float32 and the 16-bit formats, and the owner's sum of 16-bit
// contributions: widened to float32, added in the order given, rounded once. Kernels for the
// scalar level, AVX2 + F16C and AVX-512, chosen by CPU at run time; every level gives the same
// bits (the scalar one is the reference the tests hold the others to).
#pragma once

#include <cstddef>

#include "optireduce/elements/format.hpp"

namespace optireduce {

enum class ConvertLevel { scalar, f16c, avx512 };
const char* to_string(ConvertLevel level);
// The widest level this CPU runs.
ConvertLevel best_convert_level();

// out[i] = in[i] as float32 (exact), for a 16-bit format.
void widen(ElementFormat format, const void* in, float* out, std::size_t n, ConvertLevel level = best_convert_level());
// out[i] = in[i] rounded to a 16-bit format (nearest, ties to even; out of range: infinity).
void narrow(ElementFormat format, const float* in, void* out, std::size_t n, ConvertLevel level = best_convert_level());

// One pass of the owner's sum of 16-bit contributions, element by element:
//   s = running ? running[i] : widen(sources[0][i]), then s += widen(source[i]) for each further
//   source in order (all of `sources` when running is given), in float32.
// With `rounded` the pass is the last: s is rounded once into `rounded` and, unless null,
// `rounded_also`; otherwise s goes to `running_out` (which may be `running`). Sources may sit at
// any byte address and may be `rounded` itself (each group of elements is read before it is
// written). One pass: each element's sum stays in a register from its first source to its
// rounding. Where two NaNs meet, the sum is the first one (quieted).
struct WidenedSum {
  ElementFormat format = ElementFormat::float16;
  const float* running = nullptr;
  const void* const* sources = nullptr;
  int count = 0;
  float* running_out = nullptr;
  void* rounded = nullptr;
  void* rounded_also = nullptr;
};
void sum_widened(const WidenedSum& sum, std::size_t n, ConvertLevel level = best_convert_level());

}  // namespace optireduce
