#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cstring>
#include <utility>

#include "optireduce/engine/tar/wire_header.hpp"

namespace optireduce {
namespace {

WireHeader sample() {
  WireHeader h;
  h.kind = MessageKind::gather_chunk;
  h.flags = WireHeader::kFlagLastSlice;
  h.source = 3;
  h.comm_id = 0x0123456789abcdefull;
  h.epoch = 42;
  h.total = 1ull << 33;
  h.offset = (1ull << 33) - 100;
  h.length = 100;
  h.stamp_scatter = 1234.5f;
  h.stamp_gather = 99.25f;
  return h;
}

TEST(WireHeader, RoundTrip) {
  std::array<std::byte, WireHeader::kEncodedSize> bytes;
  encode(sample(), bytes);
  WireHeader d;
  ASSERT_TRUE(decode(bytes, d));
  const WireHeader s = sample();
  EXPECT_EQ(d.kind, s.kind);
  EXPECT_TRUE(d.last_slice());
  EXPECT_EQ(d.source, s.source);
  EXPECT_EQ(d.comm_id, s.comm_id);
  EXPECT_EQ(d.epoch, s.epoch);
  EXPECT_EQ(d.total, s.total);
  EXPECT_EQ(d.offset, s.offset);
  EXPECT_EQ(d.length, s.length);
  EXPECT_EQ(d.stamp_scatter, s.stamp_scatter);
  EXPECT_EQ(d.stamp_gather, s.stamp_gather);
}

TEST(WireHeader, ALastSliceCarriesHowManyFollowItAndKeepsItsOtherFlags) {
  for (std::uint32_t follow : {0u, 1u, 2u, 3u, 7u}) {
    WireHeader h = sample();
    h.flags = WireHeader::last_slice_flags(follow) | WireHeader::kFlagGatherPhase | (5u << WireHeader::kResendRoundShift);
    std::array<std::byte, WireHeader::kEncodedSize> bytes;
    encode(h, bytes);
    WireHeader d;
    ASSERT_TRUE(decode(bytes, d));
    EXPECT_TRUE(d.last_slice());
    EXPECT_EQ(d.slices_to_follow(), std::min(follow, 3u)) << "saturates at what the field holds";
    EXPECT_EQ(d.resend_round(), 5u) << "the count does not spill into the resend round";
    EXPECT_FALSE(d.partial());
  }
  EXPECT_EQ(sample().slices_to_follow(), 0u);
}

TEST(WireHeader, LittleEndianOnTheWire) {
  std::array<std::byte, WireHeader::kEncodedSize> bytes;
  encode(sample(), bytes);
  EXPECT_EQ(bytes[0], std::byte{'O'});
  EXPECT_EQ(bytes[1], std::byte{'P'});
  EXPECT_EQ(bytes[2], std::byte{'T'});
  EXPECT_EQ(bytes[3], std::byte{'R'});
}

TEST(WireHeader, AMissingListsExtentCountsBytesOfTheListNotElements) {
  // A small call's list with the loss figures after its bitmap is longer than the call has
  // elements: the list's geometry is checked where it is known (FillAgreement::piece_of).
  WireHeader h = sample();
  h.kind = MessageKind::missing_list;
  h.flags = WireHeader::kFlagFigures;
  h.total = 16;
  h.offset = 0;
  h.length = 89;
  std::array<std::byte, WireHeader::kEncodedSize> bytes;
  encode(h, bytes);
  WireHeader d;
  ASSERT_TRUE(decode(bytes, d));
  EXPECT_EQ(d.length, 89u);
  EXPECT_EQ(d.flags, WireHeader::kFlagFigures);
  h.kind = MessageKind::gather_chunk;
  encode(h, bytes);
  EXPECT_FALSE(decode(bytes, d)) << "a chunk past the call's elements";
}

TEST(WireHeader, EachKindsExtentIsCheckedByItsOwnRule) {
  // Every kind, with the rule it states: elements of the call, or bytes of a list (whose
  // geometry FillAgreement::piece_of checks).
  const std::pair<MessageKind, ExtentRule> kinds[] = {
      {MessageKind::scatter_chunk, ExtentRule::within_call}, {MessageKind::gather_chunk, ExtentRule::within_call},
      {MessageKind::peer_done, ExtentRule::within_call},     {MessageKind::missing_list, ExtentRule::list_bytes},
      {MessageKind::call_failed, ExtentRule::within_call},   {MessageKind::resend_request, ExtentRule::within_call},
      {MessageKind::alive, ExtentRule::within_call},
  };
  static_assert(sizeof kinds / sizeof kinds[0] == static_cast<std::size_t>(MessageKind::alive), "one case per kind");
  for (const auto& [kind, rule] : kinds) {
    SCOPED_TRACE(static_cast<int>(kind));
    EXPECT_EQ(extent_rule(kind), rule);
    const bool bytes_of_a_list = rule == ExtentRule::list_bytes;
    WireHeader h = sample();
    h.kind = kind;
    h.flags = 0;
    h.total = 16;
    std::array<std::byte, WireHeader::kEncodedSize> bytes;
    WireHeader d;
    auto decodes = [&](std::uint64_t offset, std::uint32_t length) {
      h.offset = offset;
      h.length = length;
      encode(h, bytes);
      return decode(bytes, d);
    };
    EXPECT_TRUE(decodes(0, 0)) << "offset 0, nothing carried: a done, a failure, a heartbeat";
    EXPECT_TRUE(decodes(0, 2)) << "a resend request's two chunk indices, a list's first two bytes";
    EXPECT_TRUE(decodes(12, 4)) << "the last four elements";
    EXPECT_EQ(decodes(12, 5), bytes_of_a_list) << "one past the call's elements";
    EXPECT_EQ(decodes(17, 0), bytes_of_a_list) << "an offset past the call's elements";
    EXPECT_EQ(decodes(~0ull, 1), bytes_of_a_list) << "an extent that overflows";
  }
}

TEST(WireHeader, RejectsWhatIsNotOurs) {
  std::array<std::byte, WireHeader::kEncodedSize> good;
  encode(sample(), good);
  WireHeader d;
  EXPECT_FALSE(decode(std::span<const std::byte>(good).first(WireHeader::kEncodedSize - 1), d)) << "short";
  auto bad = good;
  bad[0] = std::byte{0};
  EXPECT_FALSE(decode(bad, d)) << "magic";
  bad = good;
  bad[4] = std::byte{99};
  EXPECT_FALSE(decode(bad, d)) << "version";
  bad = good;
  bad[5] = std::byte{0};
  EXPECT_FALSE(decode(bad, d)) << "kind";
  bad = good;
  bad[5] = std::byte{8};
  EXPECT_FALSE(decode(bad, d)) << "kind";
  bad = good;
  bad[5] = std::byte{static_cast<std::uint8_t>(MessageKind::alive)};
  EXPECT_TRUE(decode(bad, d)) << "the heartbeat is the last kind";
  // offset + length past total, and an offset that would overflow.
  WireHeader h = sample();
  h.length = 101;
  encode(h, bad);
  EXPECT_FALSE(decode(bad, d)) << "extent";
  h = sample();
  h.offset = ~0ull;
  encode(h, bad);
  EXPECT_FALSE(decode(bad, d)) << "extent";
}

}  // namespace
}  // namespace optireduce
