// The one receive dispatch: every field validated before use, each kind of damage rejected for
// its reason and counted where the transport's counters say, the keyed tag over header and
// payload (a flipped bit anywhere is rejected, nothing handed on), and the tag bound to its
// destination.
#include <gtest/gtest.h>

#include <random>

#include "datagram_job.hpp"
#include "optireduce/byte_order.hpp"

namespace optireduce::testing {
namespace {

using datagram::Header;
using datagram::Kind;
using datagram::Reject;

constexpr std::size_t kMaxDatagram = 1372;

struct Fixture {
  DatagramJob job{4};
  datagram::ReceiveDispatch at0{0, 4, job.auth(0), 0, kMaxDatagram};
  std::vector<std::byte> good = job.datagram(2, 0, Kind::data, pattern(56, 3), pattern(100, 9));
};

std::optional<Reject> validate(Fixture& f, const std::vector<std::byte>& wire, std::optional<int> origin = 2) {
  datagram::Validated v;
  return f.at0.validate(wire, origin, v);
}

TEST(Dispatch, AcceptsAnHonestDatagramAndNamesItsParts) {
  Fixture f;
  datagram::Validated v;
  ASSERT_EQ(f.at0.validate(f.good, 2, v), std::nullopt);
  EXPECT_EQ(v.kind, Kind::data);
  EXPECT_EQ(v.source, 2);
  EXPECT_EQ(v.sequence, 0u);
  EXPECT_EQ(std::vector<std::byte>(v.header.begin(), v.header.end()), pattern(56, 3));
  EXPECT_EQ(std::vector<std::byte>(v.payload.begin(), v.payload.end()), pattern(100, 9));
  EXPECT_EQ(v.wire.size(), f.good.size());
  // The transport cannot tell where it came from: the tag alone vouches.
  EXPECT_EQ(f.at0.validate(f.good, std::nullopt, v), std::nullopt);
}

TEST(Dispatch, RejectsEachKindOfDamageForItsReason) {
  Fixture f;
  auto changed = [&](std::size_t at, std::byte value) {
    auto w = f.good;
    w[at] = value;
    return w;
  };
  EXPECT_EQ(validate(f, {f.good.begin(), f.good.begin() + Header::kSize - 1}), Reject::short_datagram);
  EXPECT_EQ(validate(f, changed(0, std::byte{0})), Reject::bad_magic);
  EXPECT_EQ(validate(f, changed(4, std::byte{2})), Reject::bad_version);  // version 2 (GMAC tags)
  EXPECT_EQ(validate(f, changed(5, std::byte{0})), Reject::bad_kind);
  EXPECT_EQ(validate(f, changed(5, std::byte{6})), Reject::bad_kind);
  EXPECT_EQ(validate(f, changed(5, std::byte{3})), Reject::bad_kind);  // parity without FEC
  // Truncated and oversized: the lengths must add up to the datagram exactly.
  EXPECT_EQ(validate(f, {f.good.begin(), f.good.end() - 1}), Reject::bad_length);
  auto longer = f.good;
  longer.push_back(std::byte{0});
  EXPECT_EQ(validate(f, longer), Reject::bad_length);
  EXPECT_EQ(validate(f, std::vector<std::byte>(kMaxDatagram + 1)), Reject::bad_magic);
  auto huge = f.job.datagram(2, 0, Kind::data, pattern(56), pattern(kMaxDatagram));
  EXPECT_EQ(validate(f, huge), Reject::bad_length);  // longer than the path carries
  auto engine_header = f.job.datagram(2, 0, Kind::data, pattern(Header::kMaxEngineHeader + 1), {});
  EXPECT_EQ(validate(f, engine_header), Reject::bad_length);
  auto hello = f.job.datagram(2, 0, Kind::hello, {}, pattern(2));
  EXPECT_EQ(validate(f, hello), Reject::bad_length);  // a hello carries one byte
  auto ping = f.job.datagram(2, 0, Kind::ping, pattern(1), pattern(8));
  EXPECT_EQ(validate(f, ping), Reject::bad_length);
  // Sources: outside the job, or this rank itself.
  DatagramJob big(9);
  EXPECT_EQ(validate(f, big.datagram(8, 0, Kind::data, {}, pattern(5))), Reject::bad_source);
  EXPECT_EQ(validate(f, f.job.datagram(0, 0, Kind::data, {}, pattern(5))), Reject::bad_source);
  // Endpoints: an address that is no rank's, another rank's address.
  EXPECT_EQ(validate(f, f.good, -1), Reject::unknown_endpoint);
  EXPECT_EQ(validate(f, f.good, 3), Reject::foreign_source);
  // The tag: another job's key, another destination, any covered byte changed.
  DatagramJob other(4, {std::byte{9}});
  EXPECT_EQ(validate(f, other.datagram(2, 0, Kind::data, pattern(56, 3), pattern(100, 9))), Reject::bad_tag);
  EXPECT_EQ(validate(f, f.job.datagram(2, 1, Kind::data, pattern(56, 3), pattern(100, 9))), Reject::bad_tag);
  EXPECT_EQ(validate(f, changed(8, std::byte{1})), Reject::bad_tag);  // claims rank 1 sent it
  EXPECT_EQ(validate(f, changed(16, std::byte{5})), Reject::bad_tag);  // another sequence
}

TEST(Dispatch, CountsEachReasonWhereTheTransportCountersSay) {
  Fixture f;
  RecordingSink sink;
  TransportCounters c;
  auto bad_magic = f.good;
  bad_magic[1] = std::byte{0};
  auto bad_tag = f.good;
  bad_tag.back() ^= std::byte{1};
  f.at0.dispatch({bad_magic, 2, {}}, sink, c);
  f.at0.dispatch({f.good, -1, {}}, sink, c);
  f.at0.dispatch({bad_tag, 2, {}}, sink, c);
  f.at0.dispatch({f.good, 1, {}}, sink, c);
  EXPECT_EQ(c.rejected_malformed, 1u);
  EXPECT_EQ(c.rejected_unauthenticated, 2u);
  EXPECT_EQ(c.rejected_foreign_source, 1u);
  EXPECT_EQ(c.messages_received, 0u);
  EXPECT_EQ(sink.calls(), 0u);
  f.at0.dispatch({f.good, 2, {}}, sink, c);
  EXPECT_EQ(c.messages_received, 1u);
  EXPECT_EQ(c.bytes_received, f.good.size());
  ASSERT_EQ(sink.data.size(), 1u);
  EXPECT_EQ(sink.data[0].source, 2);
}

TEST(Dispatch, AFlippedBitAnywhereIsRejectedCountedAndNothingHandedOn) {
  Fixture f;
  RecordingSink sink;
  TransportCounters c;
  std::size_t flips = 0;
  for (std::size_t at = 0; at < f.good.size(); ++at) {
    for (unsigned bit : {0u, 5u}) {
      auto w = f.good;
      w[at] ^= std::byte(static_cast<unsigned char>(1u << bit));
      f.at0.dispatch({w, 2, {}}, sink, c);
      ++flips;
    }
  }
  EXPECT_EQ(sink.calls(), 0u);
  EXPECT_EQ(c.rejected(), flips);
  EXPECT_EQ(c.messages_received, 0u);
  // Payload bytes are covered by the tag itself, not only by the lengths.
  EXPECT_GE(c.rejected_unauthenticated, 2 * 100u);
}

TEST(Dispatch, WithoutAuthenticationOnlyTheEndpointVouchesForTheSource) {
  DatagramJob job(4);
  datagram::Sealer plain(nullptr, 2, 4);
  datagram::ReceiveDispatch at0(0, 4, nullptr, 0, kMaxDatagram);
  const auto payload = pattern(100);
  const auto head = plain.seal(0, Kind::data, {}, payload);
  std::vector<std::byte> w(head.begin(), head.end());
  w.insert(w.end(), payload.begin(), payload.end());
  datagram::Validated v;
  EXPECT_EQ(at0.validate(w, 2, v), std::nullopt);
  w.back() ^= std::byte{1};
  EXPECT_EQ(at0.validate(w, 2, v), std::nullopt);  // nothing covers the payload
  EXPECT_EQ(at0.validate(w, -1, v), Reject::unknown_endpoint);
  EXPECT_EQ(at0.validate(w, 3, v), Reject::foreign_source);
}

TEST(Dispatch, HandsEachKindToItsHandler) {
  Fixture f;
  RecordingSink sink;
  TransportCounters c;
  const std::byte flags[1] = {std::byte{3}};
  f.at0.dispatch({f.job.datagram(1, 0, Kind::hello, {}, flags), 1, {}}, sink, c);
  f.at0.dispatch({f.job.datagram(1, 0, Kind::ping, {}, datagram::encode_value(77)), 1, {}}, sink, c);
  f.at0.dispatch({f.job.datagram(3, 0, Kind::pong, {}, datagram::encode_value(1u << 20)), 3, {}}, sink, c);
  ASSERT_EQ(sink.hellos.size(), 1u);
  EXPECT_EQ(sink.hellos[0], std::make_pair(1, std::uint8_t{3}));
  ASSERT_EQ(sink.pings.size(), 1u);
  EXPECT_EQ(sink.pings[0], std::make_pair(1, std::uint64_t{77}));
  ASSERT_EQ(sink.pongs.size(), 1u);
  EXPECT_EQ(sink.pongs[0], std::make_pair(3, std::uint64_t{1u << 20}));
  EXPECT_EQ(c.rejected(), 0u);
}

TEST(Dispatch, RandomBytesAreNeverAccepted) {
  Fixture f;
  std::mt19937_64 rng(5);
  for (int i = 0; i < 20000; ++i) {
    std::vector<std::byte> w(rng() % 300);
    for (auto& b : w) b = std::byte(static_cast<unsigned char>(rng()));
    if (w.size() >= 6 && i % 2) {  // half with the right magic, version and a valid kind
      put_le<std::uint32_t>(w.data(), Header::kMagic);
      w[4] = std::byte{Header::kVersion};
      w[5] = std::byte(static_cast<unsigned char>(1 + i % 5));
    }
    EXPECT_NE(validate(f, w, static_cast<int>(rng() % 4)), std::nullopt);
  }
}

}  // namespace
}  // namespace optireduce::testing
