// Forward error correction: one parity datagram rebuilds exactly one lost member of its group,
// the table is not trusted, and a rebuilt datagram passes the same validation and tag check as
// any other before anything of it is handed on.
#include <gtest/gtest.h>

#include <random>

#include "datagram_job.hpp"
#include "optireduce/datagram/fec.hpp"

namespace optireduce::testing {
namespace {

using datagram::Kind;
using datagram::ParityDecoder;
using datagram::ParityEncoder;

constexpr std::size_t kMaxDatagram = 2000;

struct Group {
  std::vector<std::vector<std::byte>> members;  // whole datagrams
  std::vector<std::uint64_t> sequences;
  std::vector<std::byte> table, parity;
};

Group encode_group(unsigned n, std::uint64_t first, std::mt19937& rng) {
  ParityEncoder enc(n);
  Group g;
  for (unsigned i = 0; i < n; ++i) {
    g.members.push_back(pattern(40 + rng() % 1400, 5 * i));  // ragged lengths
    g.sequences.push_back(first + i);
    const std::span<const std::byte> pieces[] = {std::span(g.members.back()).first(10), std::span(g.members.back()).subspan(10)};
    enc.add(first + i, pieces);
  }
  EXPECT_TRUE(enc.full());
  enc.finish(g.table, g.parity);
  EXPECT_FALSE(enc.open());
  EXPECT_EQ(g.table.size(), ParityEncoder::table_bytes(n));
  return g;
}

TEST(Fec, RebuildsExactlyOneLostMemberOfAnyGroup) {
  std::mt19937 rng(3);
  for (unsigned n : {2u, 4u, 8u, 16u}) {
    for (unsigned lost = 0; lost < n; ++lost) {
      const std::uint64_t first = 100 * n + lost;
      const Group g = encode_group(n, first, rng);
      ParityDecoder dec(n, kMaxDatagram);
      for (unsigned i = 0; i < n; ++i)
        if (i != lost) dec.add(g.sequences[i], g.members[i]);
      std::vector<std::byte> rebuilt;
      ASSERT_TRUE(dec.repair(first + n, g.table, g.parity, rebuilt)) << n << " " << lost;
      EXPECT_EQ(rebuilt, g.members[lost]);
    }
  }
}

// Datagrams sent ahead of the group's members (control messages) may push an arrived member out
// of the decoder's ring before the parity comes: it must not be rebuilt (and handed on twice).
TEST(Fec, DoesNotRebuildAMemberThatArrivedAndWasPushedOut) {
  std::mt19937 rng(5);
  const Group g = encode_group(4, 20, rng);
  ParityDecoder dec(4, kMaxDatagram);
  for (unsigned i = 0; i < 4; ++i) dec.add(g.sequences[i], g.members[i]);
  // Ten later datagrams (control messages that overtook the parity) fill the ring.
  for (std::uint64_t s = 30; s < 40; ++s) dec.add(s, pattern(100, static_cast<unsigned>(s)));
  std::vector<std::byte> rebuilt;
  EXPECT_FALSE(dec.repair(24, g.table, g.parity, rebuilt));
}

TEST(Fec, RepairsNothingWhenNothingOrTwoAreLostOrTheTableLies) {
  std::mt19937 rng(4);
  const Group g = encode_group(4, 10, rng);
  std::vector<std::byte> out;
  ParityDecoder all(4, kMaxDatagram), two(4, kMaxDatagram), lying(4, kMaxDatagram);
  for (unsigned i = 0; i < 4; ++i) all.add(10 + i, g.members[i]);
  EXPECT_FALSE(all.repair(14, g.table, g.parity, out));
  two.add(10, g.members[0]);
  two.add(11, g.members[1]);
  EXPECT_FALSE(two.repair(14, g.table, g.parity, out));
  for (unsigned i = 1; i < 4; ++i) lying.add(10 + i, g.members[i]);
  EXPECT_FALSE(lying.repair(10, g.table, g.parity, out));   // members must come before the parity
  EXPECT_FALSE(lying.repair(500, g.table, g.parity, out));  // and shortly before it
  auto table = g.table;
  table[0] = std::byte{99};  // more members than a group holds
  EXPECT_FALSE(lying.repair(14, table, g.parity, out));
  table = g.table;
  table[6] = std::byte{0xff}, table[7] = std::byte{0xff};  // a member longer than a datagram
  EXPECT_FALSE(lying.repair(14, table, g.parity, out));
  table = g.table;
  table[2 + 6] = table[2];  // two members with one sequence
  EXPECT_FALSE(lying.repair(14, table, g.parity, out));
  EXPECT_FALSE(lying.repair(14, std::span(g.table).first(3), g.parity, out));
  EXPECT_FALSE(lying.repair(14, g.table, std::span(g.parity).first(10), out));
  EXPECT_TRUE(lying.repair(14, g.table, g.parity, out));
  EXPECT_EQ(out, g.members[0]);
}

// Rank 1 sends rank 0 a group of three data datagrams and their parity; the second is lost.
struct Transfer {
  DatagramJob job{2};
  datagram::ReceiveDispatch at0{0, 2, job.auth(0), 3, kMaxDatagram};
  std::vector<std::vector<std::byte>> data;
  std::vector<std::byte> parity;

  Transfer() {
    ParityEncoder enc(3);
    for (std::uint64_t i = 0; i < 3; ++i) {
      const auto header = pattern(56, static_cast<unsigned>(i));
      const auto payload = pattern(500 + 10 * i, 9);
      data.push_back(job.datagram(1, 0, Kind::data, header, payload));
      const std::span<const std::byte> pieces[] = {data.back()};
      enc.add(i, pieces);
    }
    std::vector<std::byte> table, xor_bytes;
    enc.finish(table, xor_bytes);
    parity = job.datagram(1, 0, Kind::parity, table, xor_bytes);
  }
};

TEST(Fec, ARebuiltDatagramIsValidatedAndHandedOnLikeAnyOther) {
  Transfer t;
  RecordingSink sink;
  TransportCounters c;
  t.at0.dispatch({t.data[0], 1, {}}, sink, c);
  t.at0.dispatch({t.data[2], 1, {}}, sink, c);
  t.at0.dispatch({t.parity, 1, {}}, sink, c);
  ASSERT_EQ(sink.data.size(), 3u);
  EXPECT_EQ(sink.data[2].header, pattern(56, 1));
  EXPECT_EQ(sink.data[2].payload, pattern(510, 9));
  EXPECT_EQ(c.fec_repaired, 1u);
  EXPECT_EQ(c.rejected(), 0u);
}

TEST(Fec, ARebuiltDatagramThatFailsItsTagIsRejected) {
  // A parity that is authentic but whose XOR is wrong (an insider's, or a bug): the rebuilt
  // datagram's own tag catches it.
  Transfer t;
  ParityEncoder enc(3);
  auto wrong = t.data[1];
  wrong[200] ^= std::byte{1};
  for (const auto* d : {&t.data[0], &wrong, &t.data[2]}) {
    const std::span<const std::byte> pieces[] = {*d};
    enc.add(static_cast<std::uint64_t>(d == &t.data[0] ? 0 : d == &wrong ? 1 : 2), pieces);
  }
  std::vector<std::byte> table, xor_bytes;
  enc.finish(table, xor_bytes);
  const auto parity = t.job.datagram(1, 0, Kind::parity, table, xor_bytes);
  RecordingSink sink;
  TransportCounters c;
  t.at0.dispatch({t.data[0], 1, {}}, sink, c);
  t.at0.dispatch({t.data[2], 1, {}}, sink, c);
  t.at0.dispatch({parity, 1, {}}, sink, c);
  EXPECT_EQ(sink.data.size(), 2u);
  EXPECT_EQ(c.fec_repaired, 0u);
  EXPECT_EQ(c.rejected_unauthenticated, 1u);
}

}  // namespace
}  // namespace optireduce::testing
