// Forward error correction for the datagram transport: after a group of data datagrams to one
// peer, one parity datagram carrying the XOR of their bodies. A receiver that lost exactly one
// member of a group rebuilds it from the others and the parity; nothing is ever retransmitted.
// It repairs isolated losses (random drops), not bursts, at a cost of 1/group more bandwidth.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

namespace optireduce::ofi {

// The parity's table: [count u8][0 u8][first sequence u32][count x (header bytes u16, body bytes u16)].
constexpr unsigned kMaxFecGroup = 16;

class ParityEncoder {
 public:
  ParityEncoder(unsigned group, std::size_t max_body) : group_(group), max_body_(max_body) {}
  static std::size_t table_bytes(unsigned group) { return 6 + 4 * static_cast<std::size_t>(group); }

  void add(std::uint32_t sequence, std::span<const std::byte> header, std::span<const std::byte> payload);
  bool full() const { return members_.size() >= group_; }
  bool open() const { return !members_.empty(); }
  // The table and the XOR of the members' bodies (as long as the longest); starts a new group.
  void finish(std::vector<std::byte>& table, std::vector<std::byte>& parity);

 private:
  struct Member {
    std::uint16_t header_bytes, body_bytes;
  };
  unsigned group_;
  std::size_t max_body_;
  std::uint32_t first_ = 0;
  std::vector<Member> members_;
  std::vector<std::byte> xor_;
};

class ParityDecoder {
 public:
  ParityDecoder(unsigned group, std::size_t max_body) : max_body_(max_body), slots_(2 * group + 2) {}

  // A data datagram's body as it arrived.
  void add(std::uint32_t sequence, std::span<const std::byte> body);
  // A parity datagram (table and XOR, both untrusted): true when it rebuilt exactly one lost
  // member, written to `body` with its header length.
  bool repair(std::uint32_t parity_sequence, std::span<const std::byte> table, std::span<const std::byte> parity,
              std::vector<std::byte>& body, std::size_t& header_bytes);
  std::uint64_t repaired() const { return repaired_; }

 private:
  struct Slot {
    bool used = false;
    std::uint32_t sequence = 0;
    std::vector<std::byte> body;
  };
  std::size_t max_body_;
  std::vector<Slot> slots_;
  std::uint64_t repaired_ = 0;
};

}  // namespace optireduce::ofi
