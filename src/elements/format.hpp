// The element formats a call carries: float32, and the two 16-bit floats training sums in
// (IEEE binary16 "fp16" and bfloat16). 16-bit elements travel as 16 bits; owners widen them to
// float32, sum and round once (elements/convert.hpp).
#pragma once

#include <cstddef>
#include <cstdint>

namespace optireduce {

enum class ElementFormat : std::uint8_t { float32 = 0, float16 = 1, bfloat16 = 2 };
inline constexpr std::size_t kElementFormats = 3;

constexpr std::size_t element_bytes(ElementFormat f) { return f == ElementFormat::float32 ? 4 : 2; }

// "float32", "float16", "bfloat16": the report's keys.
constexpr const char* to_string(ElementFormat f) {
  switch (f) {
    case ElementFormat::float32: return "float32";
    case ElementFormat::float16: return "float16";
    case ElementFormat::bfloat16: return "bfloat16";
  }
  return "?";
}

}  // namespace optireduce
