// A point of a buffer as a share of its length (k/L: the k-th cut of a host with L ranks), so that
// every host and every rank places the same cut at the same element whatever the buffer's length.
#pragma once

#include <cstddef>
#include <cstdint>

namespace optireduce {

struct BufferPoint {
  std::int64_t num = 0, den = 1;  // 0 <= num <= den, den > 0

  friend bool operator<(BufferPoint a, BufferPoint b) { return a.num * b.den < b.num * a.den; }
  friend bool operator==(BufferPoint a, BufferPoint b) { return a.num * b.den == b.num * a.den; }
  // Which of n equal parts holds this point (n * num / den, rounded down): for a point below 1,
  // the part whose range [k/n, (k+1)/n) contains it.
  std::int64_t part_of(std::int64_t n) const { return n * num / den; }
  // Its element in a buffer of `elements`, cut only at multiples of `granule` (but the end):
  // depends only on the share, so equal shares written differently meet at one element.
  std::size_t element(std::size_t elements, std::size_t granule) const {
    if (num >= den) return elements;
    const auto units = static_cast<unsigned __int128>(elements / granule);
    return static_cast<std::size_t>(units * static_cast<unsigned __int128>(num) / static_cast<unsigned __int128>(den)) * granule;
  }
};

}  // namespace optireduce
