// The first 16 bytes of both of the project's wire formats, the datagram header
// (datagram/wire_format.hpp) and the engine's message header (src/tar/wire_header.hpp): magic,
// version, kind, a 16-bit field of the format's own, the sender's rank and a length,
// little-endian. One definition, so the two formats cannot drift apart in their common part.
#pragma once

#include <cstddef>
#include <cstdint>

#include "optireduce/byte_order.hpp"

namespace optireduce {

struct WirePrelude {
  static constexpr std::size_t kSize = 16;

  std::uint32_t magic = 0;
  std::uint8_t version = 0;
  std::uint8_t kind = 0;
  std::uint16_t field = 0;  // the datagram's header length; the engine message's flags
  std::uint32_t source = 0;
  std::uint32_t length = 0;  // of the payload that follows the header

  void put(ByteWriter& w) const { w.put(magic).put(version).put(kind).put(field).put(source).put(length); }

  static WirePrelude get(ByteReader& r) {
    WirePrelude p;
    p.magic = r.get<std::uint32_t>();
    p.version = r.get<std::uint8_t>();
    p.kind = r.get<std::uint8_t>();
    p.field = r.get<std::uint16_t>();
    p.source = r.get<std::uint32_t>();
    p.length = r.get<std::uint32_t>();
    return p;
  }
};

}  // namespace optireduce
