#include "datagram.hpp"

#include <array>
#include <cstring>

namespace optireduce::ofi {
namespace {

void put16(std::byte* p, std::uint16_t v) {
  p[0] = std::byte(v & 0xff);
  p[1] = std::byte(v >> 8);
}
void put32(std::byte* p, std::uint32_t v) {
  for (int i = 0; i < 4; ++i) p[i] = std::byte((v >> (8 * i)) & 0xff);
}
void put64(std::byte* p, std::uint64_t v) {
  for (int i = 0; i < 8; ++i) p[i] = std::byte((v >> (8 * i)) & 0xff);
}
std::uint64_t get(const std::byte* p, int bytes) {
  std::uint64_t v = 0;
  for (int i = bytes - 1; i >= 0; --i) v = (v << 8) | std::to_integer<std::uint64_t>(p[i]);
  return v;
}

// Tag input: the 16 header bytes before the tag, then the engine header.
std::uint64_t tag_of(const SipKey& key, const std::byte* head16, std::span<const std::byte> body_header) {
  std::array<std::byte, 16 + DatagramHeader::kMaxTaggedHeader> input;
  std::memcpy(input.data(), head16, 16);
  if (!body_header.empty()) std::memcpy(input.data() + 16, body_header.data(), body_header.size());
  return siphash24(key, {input.data(), 16 + body_header.size()});
}

}  // namespace

const char* to_string(DatagramReject r) {
  switch (r) {
    case DatagramReject::none: return "none";
    case DatagramReject::short_datagram: return "short_datagram";
    case DatagramReject::bad_magic: return "bad_magic";
    case DatagramReject::bad_version: return "bad_version";
    case DatagramReject::bad_kind: return "bad_kind";
    case DatagramReject::bad_tag: return "bad_tag";
    case DatagramReject::bad_source: return "bad_source";
    case DatagramReject::bad_length: return "bad_length";
  }
  return "?";
}

void encode_datagram_header(DatagramHeader h, const SipKey& key, std::span<const std::byte> body_header,
                            std::span<std::byte, DatagramHeader::kSize> out) {
  std::byte* p = out.data();
  put32(p, DatagramHeader::kMagic);
  p[4] = std::byte{DatagramHeader::kVersion};
  p[5] = std::byte{static_cast<unsigned char>(h.kind)};
  put16(p + 6, h.source);
  put16(p + 8, h.header_bytes);
  put16(p + 10, 0);
  put32(p + 12, h.sequence);
  put64(p + 16, tag_of(key, p, body_header.first(std::min<std::size_t>(body_header.size(), DatagramHeader::kMaxTaggedHeader))));
}

DatagramReject parse_datagram(std::span<const std::byte> datagram, const SipKey& key, int ranks, DatagramHeader& out,
                              std::span<const std::byte>& body) {
  if (datagram.size() < DatagramHeader::kSize) return DatagramReject::short_datagram;
  const std::byte* p = datagram.data();
  if (get(p, 4) != DatagramHeader::kMagic) return DatagramReject::bad_magic;
  if (std::to_integer<std::uint8_t>(p[4]) != DatagramHeader::kVersion) return DatagramReject::bad_version;
  const auto kind = std::to_integer<std::uint8_t>(p[5]);
  if (kind < 1 || kind > 5) return DatagramReject::bad_kind;
  const auto header_bytes = static_cast<std::uint16_t>(get(p + 8, 2));
  const std::size_t body_bytes = datagram.size() - DatagramHeader::kSize;
  // Length checks come before the tag only so far as the tag needs them: it covers header_bytes.
  if (header_bytes > body_bytes || header_bytes > DatagramHeader::kMaxTaggedHeader || get(p + 10, 2) != 0)
    return DatagramReject::bad_length;
  const std::span<const std::byte> rest = datagram.subspan(DatagramHeader::kSize);
  if (get(p + 16, 8) != tag_of(key, p, rest.first(header_bytes))) return DatagramReject::bad_tag;
  const auto source = static_cast<std::uint16_t>(get(p + 6, 2));
  if (source >= ranks) return DatagramReject::bad_source;
  out.kind = static_cast<DatagramKind>(kind);
  out.source = source;
  out.header_bytes = header_bytes;
  out.sequence = static_cast<std::uint32_t>(get(p + 12, 4));
  out.tag = get(p + 16, 8);
  body = rest;
  return DatagramReject::none;
}

InboundMessage inbound_message(int source, std::span<const std::byte> body, std::size_t header_bytes) {
  InboundMessage m;
  m.source = source;
  m.header = body.first(header_bytes);
  const auto payload = body.subspan(header_bytes);
  m.payload_size = payload.size();
  m.receive_into = [payload](std::span<std::byte> dst) {
    if (dst.size() != payload.size()) return false;
    if (!dst.empty()) std::memcpy(dst.data(), payload.data(), dst.size());  // an empty dst may be null
    return true;
  };
  return m;
}

}  // namespace optireduce::ofi
