#include "wire_format.hpp"

#include <algorithm>

#include "optireduce/byte_order.hpp"
#include "optireduce/wire_prelude.hpp"

namespace optireduce::datagram {

void encode(const Header& h, std::span<std::byte, Header::kSize> out) {
  ByteWriter w(out.data());
  WirePrelude{Header::kMagic, Header::kVersion, static_cast<std::uint8_t>(h.kind), h.header_bytes, h.source, h.payload_bytes}
      .put(w);
  w.put<std::uint64_t>(h.sequence);
  std::fill(out.begin() + Header::kTagOffset, out.end(), std::byte{0});
}

Header decode_fields(std::span<const std::byte, Header::kSize> in) {
  ByteReader r(in.data() + 5);  // after magic and version, which the dispatch checked
  Header h;
  h.kind = static_cast<Kind>(r.get<std::uint8_t>());
  h.header_bytes = r.get<std::uint16_t>();
  h.source = r.get<std::uint32_t>();
  h.payload_bytes = r.get<std::uint32_t>();
  h.sequence = r.get<std::uint64_t>();
  return h;
}

std::array<std::byte, kValueBytes> encode_value(std::uint64_t value) {
  std::array<std::byte, kValueBytes> out;
  put_le<std::uint64_t>(out.data(), value);
  return out;
}

std::uint64_t decode_value(std::span<const std::byte, kValueBytes> in) { return get_le<std::uint64_t>(in.data()); }

}  // namespace optireduce::datagram
