// Vectors of 16-bit elements for the tests of 16-bit calls: rounded from and widened to float32
// with the engine's conversions (elements/convert.hpp), and the gradient-like data they sum.
#pragma once

#include <cstddef>
#include <cstdint>
#include <random>
#include <vector>

#include "optireduce/elements/convert.hpp"

namespace optireduce::testing {

using Half = std::vector<std::uint16_t>;

inline Half to_half(ElementFormat f, const std::vector<float>& x) {
  Half h(x.size());
  narrow(f, x.data(), h.data(), x.size());
  return h;
}

inline std::vector<float> to_float(ElementFormat f, const Half& h) {
  std::vector<float> x(h.size());
  widen(f, h.data(), x.data(), h.size());
  return x;
}

// `n` values like gradients, drawn from `seed`: mostly N(0, 0.01), one in a thousand of magnitude
// up to 5.
inline std::vector<float> gradient_like(unsigned seed, std::size_t n) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> g(0.0f, 0.01f);
  std::uniform_real_distribution<float> u(0.0f, 1.0f);
  std::vector<float> x(n);
  for (auto& v : x) v = u(rng) < 0.001f ? 10.0f * (u(rng) - 0.5f) : g(rng);
  return x;
}

}  // namespace optireduce::testing
