#include "optireduce/engine/tar/wire_header.hpp"

#include "optireduce/byte_order.hpp"

namespace optireduce {

void encode(const WireHeader& h, EncodedHeader out) {
  ByteWriter w(out.data());
  w.put<std::uint32_t>(WireHeader::kMagic)
      .put<std::uint8_t>(WireHeader::kVersion)
      .put<std::uint8_t>(static_cast<std::uint8_t>(h.kind))
      .put<std::uint16_t>(h.flags)
      .put<std::uint32_t>(h.source)
      .put<std::uint32_t>(h.length)
      .put<std::uint64_t>(h.comm_id)
      .put<std::uint64_t>(h.epoch)
      .put<std::uint64_t>(h.total)
      .put<std::uint64_t>(h.offset)
      .put_float(h.stamp_scatter)
      .put_float(h.stamp_gather);
}

bool decode(std::span<const std::byte> in, WireHeader& h) {
  if (in.size() < WireHeader::kEncodedSize) return false;
  ByteReader r(in.data());
  if (r.get<std::uint32_t>() != WireHeader::kMagic || r.get<std::uint8_t>() != WireHeader::kVersion) return false;
  const auto kind = r.get<std::uint8_t>();
  if (kind < static_cast<std::uint8_t>(MessageKind::scatter_chunk) || kind > static_cast<std::uint8_t>(MessageKind::alive))
    return false;
  h.kind = static_cast<MessageKind>(kind);
  h.flags = r.get<std::uint16_t>();
  h.source = r.get<std::uint32_t>();
  h.length = r.get<std::uint32_t>();
  h.comm_id = r.get<std::uint64_t>();
  h.epoch = r.get<std::uint64_t>();
  h.total = r.get<std::uint64_t>();
  h.offset = r.get<std::uint64_t>();
  h.stamp_scatter = r.get_float();
  h.stamp_gather = r.get_float();
  return h.offset <= h.total && h.length <= h.total - h.offset;
}

}  // namespace optireduce
