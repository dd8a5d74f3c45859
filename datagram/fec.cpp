#include "fec.hpp"

#include <cstring>

#include "optireduce/byte_order.hpp"

namespace optireduce::datagram {
namespace {

// dst[i] ^= src[i], eight bytes at a time (parity runs over every datagram of a call).
void xor_bytes(std::byte* dst, const std::byte* src, std::size_t n) {
  std::size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    std::uint64_t a, b;
    std::memcpy(&a, dst + i, 8);
    std::memcpy(&b, src + i, 8);
    a ^= b;
    std::memcpy(dst + i, &a, 8);
  }
  for (; i < n; ++i) dst[i] ^= src[i];
}

void xor_into(std::vector<std::byte>& acc, std::span<const std::byte> data, std::size_t at) {
  if (acc.size() < at + data.size()) acc.resize(at + data.size(), std::byte{0});
  xor_bytes(acc.data() + at, data.data(), data.size());
}

}  // namespace

void ParityEncoder::add(std::uint64_t sequence, std::span<const std::span<const std::byte>> pieces) {
  std::size_t at = 0;
  for (const auto& piece : pieces) {
    xor_into(xor_, piece, at);
    at += piece.size();
  }
  members_.push_back({static_cast<std::uint32_t>(sequence), static_cast<std::uint16_t>(at)});
}

void ParityEncoder::finish(std::vector<std::byte>& table, std::vector<std::byte>& parity) {
  table.assign(table_bytes(static_cast<unsigned>(members_.size())), std::byte{0});
  ByteWriter w(table.data());
  w.put<std::uint8_t>(static_cast<std::uint8_t>(members_.size())).put<std::uint8_t>(0);
  for (const auto& m : members_) w.put<std::uint32_t>(m.sequence).put<std::uint16_t>(m.length);
  parity.swap(xor_);
  xor_.clear();
  members_.clear();
}

void ParityDecoder::add(std::uint64_t sequence, std::span<const std::byte> datagram) {
  seen_[sequence % kSeenWindow] = static_cast<std::uint32_t>(sequence);
  Slot& s = slots_[sequence % slots_.size()];
  s.used = true;
  s.sequence = static_cast<std::uint32_t>(sequence);
  s.datagram.assign(datagram.begin(), datagram.end());
}

const ParityDecoder::Slot* ParityDecoder::held(std::uint32_t sequence) const {
  const Slot& s = slots_[sequence % slots_.size()];
  return s.used && s.sequence == sequence ? &s : nullptr;
}

// The members, in increasing sequence, all shortly before the parity (within the ring), each no
// longer than a datagram.
bool ParityDecoder::read_table(std::uint32_t parity_sequence, std::span<const std::byte> table,
                               std::vector<Member>& members) const {
  if (table.size() < 2) return false;
  const std::size_t count = std::to_integer<std::size_t>(table[0]);
  if (count == 0 || count > kMaxFecGroup || table.size() != ParityEncoder::table_bytes(static_cast<unsigned>(count)) ||
      table[1] != std::byte{0})
    return false;
  ByteReader r(table.data() + 2);
  for (std::size_t i = 0; i < count; ++i) {
    Member m;
    m.sequence = r.get<std::uint32_t>();
    m.length = r.get<std::uint16_t>();
    const std::uint32_t behind = parity_sequence - m.sequence;  // modulo 2^32
    if (behind == 0 || behind >= slots_.size() || m.length > max_datagram_) return false;
    if (!members.empty() && parity_sequence - members.back().sequence <= behind) return false;
    members.push_back(m);
  }
  return true;
}

bool ParityDecoder::repair(std::uint64_t parity_sequence, std::span<const std::byte> table,
                           std::span<const std::byte> parity, std::vector<std::byte>& rebuilt) {
  std::vector<Member> members;
  if (!read_table(static_cast<std::uint32_t>(parity_sequence), table, members)) return false;
  const Member* missing = nullptr;
  for (const Member& m : members) {
    const Slot* s = held(m.sequence);
    if (s && s->datagram.size() != m.length) return false;  // the table does not describe what came
    if (s) continue;
    if (seen_[m.sequence % kSeenWindow] == m.sequence) return false;  // arrived, bytes no longer held
    if (missing) return false;  // two lost: beyond what one parity repairs
    missing = &m;
  }
  if (!missing || missing->length > parity.size()) return false;
  std::vector<std::byte> acc(parity.begin(), parity.end());
  for (const Member& m : members) {
    if (&m == missing) continue;
    const Slot* s = held(m.sequence);
    if (s->datagram.size() > acc.size()) return false;
    xor_bytes(acc.data(), s->datagram.data(), s->datagram.size());
  }
  acc.resize(missing->length);
  rebuilt.swap(acc);
  return true;
}

}  // namespace optireduce::datagram
