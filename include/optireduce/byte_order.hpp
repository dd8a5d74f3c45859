// Little-endian encoding of integers on the wire, independent of struct layout and host order.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <type_traits>

namespace optireduce {

template <typename T>
inline void put_le(std::byte* p, T v) {
  static_assert(std::is_integral_v<T>);
  for (std::size_t i = 0; i < sizeof(T); ++i) p[i] = static_cast<std::byte>((static_cast<std::uint64_t>(v) >> (8 * i)) & 0xff);
}

template <typename T>
inline T get_le(const std::byte* p) {
  static_assert(std::is_integral_v<T>);
  std::uint64_t v = 0;
  for (std::size_t i = 0; i < sizeof(T); ++i) v |= static_cast<std::uint64_t>(std::to_integer<std::uint8_t>(p[i])) << (8 * i);
  return static_cast<T>(v);
}

inline void put_le_float(std::byte* p, float f) {
  std::uint32_t bits;
  std::memcpy(&bits, &f, sizeof bits);
  put_le<std::uint32_t>(p, bits);
}

inline float get_le_float(const std::byte* p) {
  const auto bits = get_le<std::uint32_t>(p);
  float f;
  std::memcpy(&f, &bits, sizeof f);
  return f;
}

// A cursor that writes or reads fields in order.
class ByteWriter {
 public:
  explicit ByteWriter(std::byte* p) : p_(p) {}
  template <typename T>
  ByteWriter& put(T v) {
    put_le<T>(p_, v);
    p_ += sizeof(T);
    return *this;
  }
  ByteWriter& put_float(float f) {
    put_le_float(p_, f);
    p_ += 4;
    return *this;
  }
  std::byte* at() const { return p_; }

 private:
  std::byte* p_;
};

class ByteReader {
 public:
  explicit ByteReader(const std::byte* p) : p_(p) {}
  template <typename T>
  T get() {
    const T v = get_le<T>(p_);
    p_ += sizeof(T);
    return v;
  }
  float get_float() {
    const float f = get_le_float(p_);
    p_ += 4;
    return f;
  }
  const std::byte* at() const { return p_; }

 private:
  const std::byte* p_;
};

}  // namespace optireduce
