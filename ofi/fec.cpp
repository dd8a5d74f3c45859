#include "fec.hpp"

#include <algorithm>
#include <cstring>

#include "datagram.hpp"

namespace optireduce::ofi {
namespace {

void xor_into(std::vector<std::byte>& acc, std::span<const std::byte> data, std::size_t at) {
  if (acc.size() < at + data.size()) acc.resize(at + data.size(), std::byte{0});
  for (std::size_t i = 0; i < data.size(); ++i) acc[at + i] ^= data[i];
}

std::uint32_t get(std::span<const std::byte> p, std::size_t at, int bytes) {
  std::uint32_t v = 0;
  for (int i = bytes - 1; i >= 0; --i) v = (v << 8) | std::to_integer<std::uint32_t>(p[at + static_cast<std::size_t>(i)]);
  return v;
}

void put(std::vector<std::byte>& out, std::uint32_t v, int bytes) {
  for (int i = 0; i < bytes; ++i) out.push_back(std::byte((v >> (8 * i)) & 0xff));
}

}  // namespace

void ParityEncoder::add(std::uint32_t sequence, std::span<const std::byte> header, std::span<const std::byte> payload) {
  if (members_.empty()) first_ = sequence;
  members_.push_back({static_cast<std::uint16_t>(header.size()), static_cast<std::uint16_t>(header.size() + payload.size())});
  xor_into(xor_, header, 0);
  xor_into(xor_, payload, header.size());
}

void ParityEncoder::finish(std::vector<std::byte>& table, std::vector<std::byte>& parity) {
  table.clear();
  put(table, static_cast<std::uint32_t>(members_.size()), 1);
  put(table, 0, 1);
  put(table, first_, 4);
  for (const auto& m : members_) {
    put(table, m.header_bytes, 2);
    put(table, m.body_bytes, 2);
  }
  parity.swap(xor_);
  xor_.assign(0, std::byte{0});
  members_.clear();
}

void ParityDecoder::add(std::uint32_t sequence, std::span<const std::byte> body) {
  Slot& s = slots_[sequence % slots_.size()];
  s.used = true;
  s.sequence = sequence;
  s.body.assign(body.begin(), body.end());
}

bool ParityDecoder::repair(std::uint32_t parity_sequence, std::span<const std::byte> table, std::span<const std::byte> parity,
                           std::vector<std::byte>& body, std::size_t& header_bytes) {
  if (table.size() < 6) return false;
  const std::size_t count = get(table, 0, 1);
  const std::uint32_t first = get(table, 2, 4);
  // The members directly precede the parity and fit the ring.
  if (count == 0 || count > kMaxFecGroup || table.size() != 6 + 4 * count || count + 1 > slots_.size() ||
      first + count != parity_sequence)
    return false;
  std::size_t missing = count;
  for (std::size_t i = 0; i < count; ++i) {
    const Slot& s = slots_[(first + i) % slots_.size()];
    if (s.used && s.sequence == first + i) continue;
    if (missing != count) return false;  // two lost: beyond what one parity repairs
    missing = i;
  }
  if (missing == count) return false;  // nothing lost
  const std::size_t want_header = get(table, 6 + 4 * missing, 2);
  const std::size_t want_body = get(table, 8 + 4 * missing, 2);
  if (want_header > want_body || want_header > DatagramHeader::kMaxTaggedHeader || want_body > max_body_ ||
      want_body > parity.size())
    return false;
  std::vector<std::byte> acc(parity.begin(), parity.end());
  for (std::size_t i = 0; i < count; ++i) {
    if (i == missing) continue;
    const Slot& s = slots_[(first + i) % slots_.size()];
    if (s.body.size() != get(table, 8 + 4 * i, 2)) return false;  // the table does not describe what came
    if (s.body.size() > acc.size()) return false;
    for (std::size_t k = 0; k < s.body.size(); ++k) acc[k] ^= s.body[k];
  }
  acc.resize(want_body);
  body.swap(acc);
  header_bytes = want_header;
  ++repaired_;
  return true;
}

}  // namespace optireduce::ofi
