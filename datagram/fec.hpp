// Forward error correction for the datagram transports: after a group of data datagrams to one
// peer, one parity datagram carrying the XOR of those datagrams, whole (datagram header and tag
// included). A receiver that lost exactly one member rebuilds it from the others and the parity,
// and the rebuilt datagram goes through the same validation and tag check as any other.
// Nothing is ever retransmitted. It repairs isolated losses, not bursts, at 1/group more bytes.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

namespace optireduce::datagram {

// The parity's table: [count u8][0 u8] then per member [sequence (low 32 bits) u32][length u16].
inline constexpr unsigned kMaxFecGroup = 16;

class ParityEncoder {
 public:
  explicit ParityEncoder(unsigned group) : group_(group) {}
  static std::size_t table_bytes(unsigned group) { return 2 + 6 * static_cast<std::size_t>(group); }

  // One data datagram as it goes on the wire, in consecutive pieces.
  void add(std::uint64_t sequence, std::span<const std::span<const std::byte>> pieces);
  bool full() const { return members_.size() >= group_; }
  bool open() const { return !members_.empty(); }
  // The table and the XOR of the members (as long as the longest); starts a new group.
  void finish(std::vector<std::byte>& table, std::vector<std::byte>& parity);

 private:
  struct Member {
    std::uint32_t sequence;
    std::uint16_t length;
  };
  unsigned group_;
  std::vector<Member> members_;
  std::vector<std::byte> xor_;
};

class ParityDecoder {
 public:
  ParityDecoder(unsigned group, std::size_t max_datagram)
      : max_datagram_(max_datagram), slots_(2 * group + 2), seen_(kSeenWindow, kNever) {}

  // A data datagram as it arrived (already validated).
  void add(std::uint64_t sequence, std::span<const std::byte> datagram);
  // A parity datagram's table and XOR (untrusted): true when they rebuild exactly one member
  // that is missing here, written to `rebuilt` (still to be validated like any datagram).
  bool repair(std::uint64_t parity_sequence, std::span<const std::byte> table, std::span<const std::byte> parity,
              std::vector<std::byte>& rebuilt);

 private:
  struct Slot {
    bool used = false;
    std::uint32_t sequence = 0;
    std::vector<std::byte> datagram;
  };
  struct Member {
    std::uint32_t sequence;
    std::size_t length;
  };
  bool read_table(std::uint32_t parity_sequence, std::span<const std::byte> table, std::vector<Member>& members) const;
  const Slot* held(std::uint32_t sequence) const;

  // The sequences that arrived lately, whether their bytes are still held or not: a member that
  // arrived but was pushed out of the ring (by datagrams sent ahead of it: control messages do
  // not wait behind data) is not rebuilt as if it had been lost, which would hand it on twice.
  static constexpr std::size_t kSeenWindow = 1024;
  static constexpr std::uint64_t kNever = ~std::uint64_t{0};

  std::size_t max_datagram_;
  std::vector<Slot> slots_;
  std::vector<std::uint64_t> seen_;
};

}  // namespace optireduce::datagram
