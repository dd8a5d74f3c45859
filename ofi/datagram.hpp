// The datagram transport's own header, in front of the engine's header and payload on the wire:
//
//   [provider prefix][DatagramHeader, 24 bytes][body: engine header (header_bytes) + payload]
//
// Every field is checked before anything else is read, and the tag first of all: it is SipHash
// of the first 16 header bytes and the engine header under a key only the job's ranks know, so a
// stranger's datagram is dropped after hashing at most 16 + 128 bytes. The payload is not covered
// (keeping the check cheap); an attacker on the path could alter it, one outside the job cannot
// inject anything.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>

#include "optireduce/transport.hpp"
#include "siphash.hpp"

namespace optireduce::ofi {

enum class DatagramKind : std::uint8_t {
  data = 1,    // body: engine header + payload
  hello = 2,   // connection check at creation; body empty
  parity = 3,  // FEC: body = member table + XOR of the group's bodies
  ping = 4,    // flow control: "tell me when you have read this" (body: 8-byte value)
  pong = 5,    // flow control: the ping's value, sent when the ping was read
};

struct DatagramHeader {
  static constexpr std::uint32_t kMagic = 0x4744524fu;  // "ORDG" on the wire
  static constexpr std::uint8_t kVersion = 1;
  static constexpr std::size_t kSize = 24;
  static constexpr std::size_t kMaxTaggedHeader = 128;  // header bytes covered by the tag

  DatagramKind kind = DatagramKind::data;
  std::uint16_t source = 0;        // sending rank
  std::uint16_t header_bytes = 0;  // bytes of the body that are the (tagged) engine header
  std::uint32_t sequence = 0;      // per destination, from 0; FEC groups are runs of it
  std::uint64_t tag = 0;
};

// Why a datagram was dropped before the engine saw it.
enum class DatagramReject { none, short_datagram, bad_magic, bad_version, bad_kind, bad_tag, bad_source, bad_length };
constexpr std::size_t kDatagramRejectReasons = 8;
const char* to_string(DatagramReject r);

// Writes the header with its tag over `body_header` (the first header_bytes of the body).
void encode_datagram_header(DatagramHeader h, const SipKey& key, std::span<const std::byte> body_header,
                            std::span<std::byte, DatagramHeader::kSize> out);

// Parses and authenticates one received datagram (without provider prefix). On success `body`
// is the rest of the datagram. `ranks` bounds the source.
DatagramReject parse_datagram(std::span<const std::byte> datagram, const SipKey& key, int ranks, DatagramHeader& out,
                              std::span<const std::byte>& body);

// The engine's view of an accepted datagram body (engine header, then payload); valid while
// `body` is. The payload is copied only when the engine asks for it, into the place it chose.
InboundMessage inbound_message(int source, std::span<const std::byte> body, std::size_t header_bytes);

}  // namespace optireduce::ofi
