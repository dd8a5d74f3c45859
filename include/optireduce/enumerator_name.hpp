// The name of an enumerator of an enum class whose values count from 0, looked up in a table of
// names in the same order; "?" for a value outside it. Keeps to_string(...) of the settings and
// kernel levels a line each.
#pragma once

#include <cstddef>

namespace optireduce {

template <typename Enum, std::size_t N>
constexpr const char* enumerator_name(Enum value, const char* const (&names)[N]) {
  const auto i = static_cast<std::size_t>(value);
  return i < N ? names[i] : "?";
}

}  // namespace optireduce
