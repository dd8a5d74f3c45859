// The datagram transport's wire pieces without a network: the keyed tag, the header's
// validation (every field, tag first), forward error correction and pacing.
#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>
#include <random>
#include <vector>

#include "datagram.hpp"
#include "fec.hpp"
#include "siphash.hpp"
#include "token_bucket.hpp"

namespace optireduce::ofi {
namespace {

std::vector<std::byte> bytes(std::size_t n, unsigned first = 0) {
  std::vector<std::byte> v(n);
  for (std::size_t i = 0; i < n; ++i) v[i] = std::byte(static_cast<unsigned char>(first + i));
  return v;
}

TEST(SipHash, MatchesTheReferenceVectors) {
  // Key 00..0f; messages 00..(n-1): the first, 16th and 64th vectors of the SipHash paper's list.
  const SipKey key{0x0706050403020100ull, 0x0f0e0d0c0b0a0908ull};
  EXPECT_EQ(siphash24(key, {}), 0x726fdb47dd0e0e31ull);
  EXPECT_EQ(siphash24(key, bytes(15)), 0xa129ca6149be45e5ull);
  EXPECT_EQ(siphash24(key, bytes(63)), 0x958a324ceb064572ull);
}

struct Datagram {
  std::vector<std::byte> wire;
};

Datagram make(const SipKey& key, DatagramKind kind, std::uint16_t source, std::size_t header_bytes, std::size_t payload) {
  DatagramHeader h;
  h.kind = kind;
  h.source = source;
  h.header_bytes = static_cast<std::uint16_t>(header_bytes);
  h.sequence = 7;
  const auto body = bytes(header_bytes + payload, 3);
  Datagram d;
  d.wire.resize(DatagramHeader::kSize);
  encode_datagram_header(h, key, std::span(body).first(header_bytes),
                         std::span<std::byte, DatagramHeader::kSize>(d.wire.data(), DatagramHeader::kSize));
  d.wire.insert(d.wire.end(), body.begin(), body.end());
  return d;
}

const SipKey kKey{0x1234, 0x5678};

TEST(Datagram, RoundTripsAndNamesItsParts) {
  const auto d = make(kKey, DatagramKind::data, 2, 56, 100);
  DatagramHeader h;
  std::span<const std::byte> body;
  ASSERT_EQ(parse_datagram(d.wire, kKey, 4, h, body), DatagramReject::none);
  EXPECT_EQ(h.kind, DatagramKind::data);
  EXPECT_EQ(h.source, 2);
  EXPECT_EQ(h.header_bytes, 56);
  EXPECT_EQ(h.sequence, 7u);
  EXPECT_EQ(body.size(), 156u);
}

TEST(Datagram, RejectsEachKindOfDamageForItsReason) {
  DatagramHeader h;
  std::span<const std::byte> body;
  const auto good = make(kKey, DatagramKind::data, 1, 56, 64).wire;
  auto check = [&](std::vector<std::byte> w, DatagramReject want, int ranks = 4, SipKey key = kKey) {
    EXPECT_EQ(parse_datagram(w, key, ranks, h, body), want) << to_string(want);
  };
  check({good.begin(), good.begin() + 10}, DatagramReject::short_datagram);
  auto w = good;
  w[0] ^= std::byte{1};
  check(w, DatagramReject::bad_magic);
  w = good;
  w[4] = std::byte{9};
  check(w, DatagramReject::bad_version);
  w = good;
  w[5] = std::byte{0};
  check(w, DatagramReject::bad_kind);
  w = good;
  w[8] = std::byte{200};  // header_bytes beyond what is tagged
  check(w, DatagramReject::bad_length);
  w = good;
  w[DatagramHeader::kSize + 3] ^= std::byte{1};  // the engine header is covered by the tag
  check(w, DatagramReject::bad_tag);
  w = good;
  w[6] = std::byte{3};  // another source: the tag covers it
  check(w, DatagramReject::bad_tag);
  check(good, DatagramReject::bad_tag, 4, SipKey{1, 2});  // another job's key
  check(good, DatagramReject::bad_source, 1);            // source 1 in a 1-rank job
  // The payload is not covered (by design: it keeps the check cheap).
  w = good;
  w.back() ^= std::byte{1};
  check(w, DatagramReject::none);
}

TEST(Datagram, RandomBytesAreNeverAccepted) {
  std::mt19937_64 rng(5);
  DatagramHeader h;
  std::span<const std::byte> body;
  for (int i = 0; i < 20000; ++i) {
    std::vector<std::byte> w(rng() % 200);
    for (auto& b : w) b = std::byte(static_cast<unsigned char>(rng()));
    if (w.size() >= 4 && i % 2) {  // half of them with the right magic and version
      w[0] = std::byte{0x4f}, w[1] = std::byte{0x52}, w[2] = std::byte{0x44}, w[3] = std::byte{0x47};
      if (w.size() > 4) w[4] = std::byte{1};
    }
    EXPECT_NE(parse_datagram(w, kKey, 4, h, body), DatagramReject::none);
  }
}

// One group through the encoder, member `lost` withheld from the decoder.
struct Group {
  std::vector<std::vector<std::byte>> headers, payloads;
  std::vector<std::byte> table, parity;
};

Group encode_group(unsigned n, std::uint32_t first_sequence, std::mt19937& rng) {
  ParityEncoder enc(n, 2000);
  Group g;
  for (unsigned i = 0; i < n; ++i) {
    g.headers.push_back(bytes(56, i));
    g.payloads.push_back(bytes(rng() % 1400, 7 * i));  // ragged lengths
    enc.add(first_sequence + i, g.headers.back(), g.payloads.back());
  }
  EXPECT_TRUE(enc.full());
  enc.finish(g.table, g.parity);
  EXPECT_FALSE(enc.open());
  return g;
}

TEST(Fec, RebuildsExactlyOneLostMemberOfAnyGroup) {
  std::mt19937 rng(3);
  for (unsigned n : {2u, 4u, 8u, 16u}) {
    for (unsigned lost = 0; lost < n; ++lost) {
      const std::uint32_t first = 100 * n + lost;
      const Group g = encode_group(n, first, rng);
      ParityDecoder dec(n, 2000);
      for (unsigned i = 0; i < n; ++i) {
        if (i == lost) continue;
        auto body = g.headers[i];
        body.insert(body.end(), g.payloads[i].begin(), g.payloads[i].end());
        dec.add(first + i, body);
      }
      std::vector<std::byte> repaired;
      std::size_t header_bytes = 0;
      ASSERT_TRUE(dec.repair(first + n, g.table, g.parity, repaired, header_bytes)) << n << " " << lost;
      auto want = g.headers[lost];
      want.insert(want.end(), g.payloads[lost].begin(), g.payloads[lost].end());
      EXPECT_EQ(repaired, want);
      EXPECT_EQ(header_bytes, 56u);
      EXPECT_EQ(dec.repaired(), 1u);
    }
  }
}

TEST(Fec, RepairsNothingWhenNothingOrTwoAreLostOrTheTableLies) {
  std::mt19937 rng(4);
  const Group g = encode_group(4, 10, rng);
  auto body = [&](unsigned i) {
    auto b = g.headers[i];
    b.insert(b.end(), g.payloads[i].begin(), g.payloads[i].end());
    return b;
  };
  std::vector<std::byte> out;
  std::size_t hb = 0;
  ParityDecoder all(4, 2000), two(4, 2000), lying(4, 2000);
  for (unsigned i = 0; i < 4; ++i) all.add(10 + i, body(i));
  EXPECT_FALSE(all.repair(14, g.table, g.parity, out, hb));
  two.add(10, body(0));
  two.add(11, body(1));
  EXPECT_FALSE(two.repair(14, g.table, g.parity, out, hb));
  for (unsigned i = 1; i < 4; ++i) lying.add(10 + i, body(i));
  EXPECT_FALSE(lying.repair(15, g.table, g.parity, out, hb));  // members must directly precede it
  auto table = g.table;
  table[0] = std::byte{99};  // more members than a group holds
  EXPECT_FALSE(lying.repair(14, table, g.parity, out, hb));
  table = g.table;
  table[8] = std::byte{0xff}, table[9] = std::byte{0xff};  // a body longer than a datagram
  EXPECT_FALSE(lying.repair(14, table, g.parity, out, hb));
  EXPECT_FALSE(lying.repair(14, std::span(g.table).first(3), g.parity, out, hb));
  EXPECT_TRUE(lying.repair(14, g.table, g.parity, out, hb));
}

TEST(TokenBucket, PacesToItsRateAfterTheBurst) {
  using C = TokenBucket::Clock;
  TokenBucket b(1e6, 10000);  // 1 MB/s, 10 kB burst
  auto t = C::now() + std::chrono::seconds(1);  // a full bucket
  int sent = 0;
  while (b.try_take(1000, t)) ++sent;
  EXPECT_EQ(sent, 10);
  EXPECT_FALSE(b.try_take(1000, t));
  const auto ready = b.ready_at(1000, t);
  EXPECT_NEAR(std::chrono::duration<double>(ready - t).count(), 1e-3, 1e-5);
  EXPECT_TRUE(b.try_take(1000, ready));
  // Over 100 ms of steady demand it passes 100 kB (+ the burst), no more.
  std::size_t bytes = 0;
  for (auto now = ready; now < ready + std::chrono::milliseconds(100); now += std::chrono::microseconds(50))
    while (b.try_take(1000, now)) bytes += 1000;
  EXPECT_GE(bytes, 99000u);
  EXPECT_LE(bytes, 111000u);
}

}  // namespace
}  // namespace optireduce::ofi
