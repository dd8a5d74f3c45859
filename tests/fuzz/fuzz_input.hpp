// The fuzz input of datagram_fuzz, shared by its two halves (the receive path alone, and the
// receive path feeding real engines): a 3-byte preamble, then records
// [u16 length][u8 flags][u8 extra][bytes], each one datagram (or part of a GRO buffer).
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <span>
#include <vector>

#include "optireduce/datagram/sealer.hpp"

namespace optireduce::fuzz {

// Record flags of both halves.
constexpr std::uint8_t kOriginMask = 3;        // 0 rank 1, 1 rank 2, 2 a stranger, 3 rank 0 itself
constexpr std::uint8_t kSign = 1 << 2;         // an insider: valid header fields, tagged (source: extra % ranks)
constexpr std::uint8_t kJoin = 1 << 3;         // joined with the next record into one GRO buffer
constexpr std::uint8_t kTruncated = 1 << 4;    // the kernel reported MSG_TRUNC
// The receive path alone: honest rank 1 sends a datagram before the record (extra: its size),
// possibly lost, possibly a hello, ping or pong.
constexpr std::uint8_t kHonestFirst = 1 << 5;
constexpr std::uint8_t kHonestLost = 1 << 6;
constexpr std::uint8_t kHonestControl = 1 << 7;
// With the engines: the record's first bytes choose the fields of an engine header that the
// harness writes in front of the rest, consistent with the call in progress (see engine_fuzz).
constexpr std::uint8_t kEngineHeader = 1 << 5;

// b0: bit 0 authentication off, bit 1 FEC, bit 2 the engine not listening (data is kept until the
// end), bit 3 64 KB datagrams (else 1372), bit 4 real engines behind the receive path, bit 5
// their calls bounded (else exact), bit 6 the Hadamard transform on; b1-b2: a seed for sizes
// and honest contents.
struct Preamble {
  static constexpr std::size_t kSize = 3;
  bool authenticate, fec, listening, big, engines, bounded, hadamard;
  std::uint16_t seed;
  explicit Preamble(const std::uint8_t* d)
      : authenticate(!(d[0] & 1)), fec(d[0] & 2), listening(!(d[0] & 4)), big(d[0] & 8), engines(d[0] & 16),
        bounded(d[0] & 32), hadamard(d[0] & 64), seed(static_cast<std::uint16_t>(d[1] | d[2] << 8)) {}
  std::size_t max_datagram() const { return big ? 65507 : 1372; }
};

struct Record {
  std::uint8_t flags = 0, extra = 0;
  std::vector<std::byte> bytes;
};

inline void check(bool ok, const char* what) {
  if (ok) return;
  std::fprintf(stderr, "datagram_fuzz: invariant violated: %s\n", what);
  std::abort();
}

inline std::vector<Record> parse(const std::uint8_t* data, std::size_t size) {
  std::vector<Record> records;
  for (std::size_t at = Preamble::kSize; at + 4 <= size && records.size() < 64;) {
    const std::size_t length = data[at] | (data[at + 1] << 8);
    Record r;
    r.flags = data[at + 2];
    r.extra = data[at + 3];
    at += 4;
    const std::size_t n = std::min(length, size - at);
    r.bytes.assign(reinterpret_cast<const std::byte*>(data + at), reinterpret_cast<const std::byte*>(data + at + n));
    at += n;
    records.push_back(std::move(r));
  }
  return records;
}

// One datagram as it goes on the wire.
inline std::vector<std::byte> wire(const datagram::HeaderBytes& head, std::span<const std::byte> header,
                                   std::span<const std::byte> payload) {
  std::vector<std::byte> w(head.begin(), head.end());
  w.insert(w.end(), header.begin(), header.end());
  w.insert(w.end(), payload.begin(), payload.end());
  return w;
}

// An insider's datagram: the fuzzed body behind a datagram header whose fields are consistent
// with it, tagged by `insider` for rank 0 (the receiver of both halves).
inline void sign(datagram::Sealer& insider, std::vector<std::byte>& d) {
  if (d.size() < datagram::Header::kSize) return;
  const std::size_t body = d.size() - datagram::Header::kSize;
  const std::size_t header_bytes = (std::to_integer<std::size_t>(d[6]) | std::to_integer<std::size_t>(d[7]) << 8) %
                                   (std::min<std::size_t>(body, 300) + 1);
  const unsigned kind = 1 + std::to_integer<unsigned>(d[5]) % datagram::kLastKind;
  const std::span<const std::byte> rest(d.data() + datagram::Header::kSize, body);
  const auto head = insider.seal(0, static_cast<datagram::Kind>(kind), rest.first(header_bytes), rest.subspan(header_bytes));
  std::copy(head.begin(), head.end(), d.begin());
}

// A GRO buffer from records[i] on: it and the following records that ask to be joined, cut at
// the first one's size. Advances i past what it used.
inline std::vector<std::byte> gro_buffer(const std::vector<Record>& records, std::size_t& i, std::size_t& segment,
                                         std::size_t max_bytes) {
  std::vector<std::byte> buffer = records[i].bytes;
  segment = (records[i].flags & kJoin) ? records[i].bytes.size() : 0;
  while ((records[i].flags & kJoin) && i + 1 < records.size() && buffer.size() < max_bytes) {
    ++i;
    buffer.insert(buffer.end(), records[i].bytes.begin(), records[i].bytes.end());
  }
  buffer.resize(std::min(buffer.size(), max_bytes));
  return buffer;
}

}  // namespace optireduce::fuzz
