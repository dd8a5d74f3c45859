#include "wire_header.hpp"

#include <cstring>

namespace optireduce {
namespace {

template <typename T>
void put(std::byte*& p, T v) {
  for (std::size_t i = 0; i < sizeof(T); ++i) p[i] = static_cast<std::byte>((static_cast<std::uint64_t>(v) >> (8 * i)) & 0xff);
  p += sizeof(T);
}
template <typename T>
T get(const std::byte*& p) {
  std::uint64_t v = 0;
  for (std::size_t i = 0; i < sizeof(T); ++i) v |= static_cast<std::uint64_t>(p[i]) << (8 * i);
  p += sizeof(T);
  return static_cast<T>(v);
}

}  // namespace

void encode(const WireHeader& h, std::span<std::byte, WireHeader::kEncodedSize> out) {
  std::byte* p = out.data();
  put<std::uint32_t>(p, WireHeader::kMagic);
  put<std::uint8_t>(p, WireHeader::kVersion);
  put<std::uint8_t>(p, static_cast<std::uint8_t>(h.phase));
  put<std::uint16_t>(p, h.flags);
  put<std::uint32_t>(p, h.source);
  put<std::uint32_t>(p, h.length);
  put<std::uint64_t>(p, h.comm_id);
  put<std::uint64_t>(p, h.epoch);
  put<std::uint64_t>(p, h.total);
  put<std::uint64_t>(p, h.offset);
  for (float stamp : {h.stamp_scatter, h.stamp_gather}) {
    std::uint32_t bits;
    std::memcpy(&bits, &stamp, sizeof bits);
    put<std::uint32_t>(p, bits);
  }
}

DecodeError decode(std::span<const std::byte> in, WireHeader& h) {
  if (in.size() < WireHeader::kEncodedSize) return DecodeError::short_header;
  const std::byte* p = in.data();
  if (get<std::uint32_t>(p) != WireHeader::kMagic) return DecodeError::bad_magic;
  if (get<std::uint8_t>(p) != WireHeader::kVersion) return DecodeError::bad_version;
  auto phase = get<std::uint8_t>(p);
  if (phase < static_cast<std::uint8_t>(Phase::scatter_reduce) || phase > static_cast<std::uint8_t>(Phase::missing))
    return DecodeError::bad_phase;
  h.phase = static_cast<Phase>(phase);
  h.flags = get<std::uint16_t>(p);
  h.source = get<std::uint32_t>(p);
  h.length = get<std::uint32_t>(p);
  h.comm_id = get<std::uint64_t>(p);
  h.epoch = get<std::uint64_t>(p);
  h.total = get<std::uint64_t>(p);
  h.offset = get<std::uint64_t>(p);
  for (float* stamp : {&h.stamp_scatter, &h.stamp_gather}) {
    const std::uint32_t bits = get<std::uint32_t>(p);
    std::memcpy(stamp, &bits, sizeof bits);
  }
  if (h.offset > h.total || h.length > h.total - h.offset) return DecodeError::bad_extent;
  return DecodeError::none;
}

const char* to_string(DecodeError e) {
  switch (e) {
    case DecodeError::none: return "none";
    case DecodeError::short_header: return "short_header";
    case DecodeError::bad_magic: return "bad_magic";
    case DecodeError::bad_version: return "bad_version";
    case DecodeError::bad_phase: return "bad_phase";
    case DecodeError::bad_extent: return "bad_extent";
  }
  return "?";
}

}  // namespace optireduce
