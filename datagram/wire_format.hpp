// The header every datagram of the datagram transports (udp/, ofi/) starts with, in front of the
// engine's header and payload:
//
//   offset  0  magic          u32   "ORDG"
//           4  version        u8
//           5  kind           u8
//           6  header_bytes   u16   engine header (data) or member table (parity) that follows
//           8  source         u32   sending rank
//          12  payload_bytes  u32   bytes after the header_bytes: the datagram ends there exactly
//          16  sequence       u64   per destination, from 0, every kind; never repeats
//          24  tag             8 B  keyed tag (UMAC-64) over bytes 0..23, the header_bytes and the payload
//          32  header_bytes, then payload_bytes
//
// All integers little-endian. (source, sequence) is the tag's nonce, unique per destination key.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>

namespace optireduce::datagram {

enum class Kind : std::uint8_t {
  data = 1,    // engine header + payload
  hello = 2,   // reachability probe at connect; payload: HelloFlags
  parity = 3,  // FEC: header = member table, payload = XOR of the members
  ping = 4,    // flow control: "confirm when you have read this"; payload: u64 value
  pong = 5,    // flow control: the ping's value, sent when the ping was read
};
inline constexpr std::uint8_t kLastKind = 5;

struct Header {
  static constexpr std::uint32_t kMagic = 0x4744524fu;  // "ORDG" on the wire
  static constexpr std::uint8_t kVersion = 3;
  static constexpr std::size_t kSize = 32;
  static constexpr std::size_t kTagOffset = 24;  // the bytes before it are covered by the tag
  static constexpr std::size_t kTagSize = 8;
  static constexpr std::size_t kMaxEngineHeader = 256;

  Kind kind = Kind::data;
  std::uint16_t header_bytes = 0;
  std::uint32_t source = 0;
  std::uint32_t payload_bytes = 0;
  std::uint64_t sequence = 0;
};

using HeaderBytes = std::array<std::byte, Header::kSize>;

// Writes every field; the tag is left zero (Authenticator::seal fills it).
void encode(const Header& h, std::span<std::byte, Header::kSize> out);

// Reads the fields as they are, without judging them (validation is the dispatch's).
Header decode_fields(std::span<const std::byte, Header::kSize> in);

// Bodies of the control kinds.
inline constexpr std::size_t kValueBytes = 8;  // ping, pong
inline constexpr std::size_t kHelloBytes = 1;  // hello
std::array<std::byte, kValueBytes> encode_value(std::uint64_t value);
std::uint64_t decode_value(std::span<const std::byte, kValueBytes> in);

}  // namespace optireduce::datagram
