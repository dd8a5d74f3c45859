// The udp address blob (round trip, strict parsing) and the choice of path from every rank's
// address: loopback on one kernel and namespace, a common subnet across hosts, the named
// interface, never loopback across hosts, the datagram size from the smallest MTU.
#include <gtest/gtest.h>

#include "optireduce/udp/address.hpp"
#include "optireduce/udp/path.hpp"

namespace optireduce::udp {
namespace {

datagram::HostIdentity host(int n) {
  datagram::HostIdentity h;
  h.known = true;
  h.boot_id[0] = std::byte(static_cast<unsigned char>(n));
  h.netns_inode = 4026531840u + static_cast<unsigned>(n);
  return h;
}

Endpoint loopback(std::uint16_t port) { return {{"lo", 0x7f000001u, 8, 65536, true}, port, 1u << 20}; }
Endpoint eth(const char* name, std::uint32_t ip, std::uint8_t prefix, std::uint32_t mtu, std::uint16_t port = 5000) {
  return {{name, ip, prefix, mtu, false}, port, 1u << 20};
}

Address rank(int on_host, std::vector<Endpoint> endpoints) {
  Address a;
  a.secret[0] = std::byte{42};
  a.host = host(on_host);
  a.endpoints = std::move(endpoints);
  return a;
}

TEST(UdpAddress, RoundTripsEveryField) {
  Address a = rank(3, {loopback(4000), eth("eth0", 0x0a000002u, 24, 1500, 4001)});
  a.authenticate = false;
  Address b;
  ASSERT_TRUE(decode(encode(a), b).ok());
  EXPECT_FALSE(b.authenticate);
  EXPECT_EQ(b.secret, a.secret);
  EXPECT_TRUE(b.host.same_as(a.host));
  ASSERT_EQ(b.endpoints.size(), 2u);
  EXPECT_EQ(b.endpoints[1].name, "eth0");
  EXPECT_EQ(b.endpoints[1].ip, 0x0a000002u);
  EXPECT_EQ(b.endpoints[1].port, 4001);
  EXPECT_EQ(b.endpoints[1].prefix, 24);
  EXPECT_FALSE(b.endpoints[1].loopback);
  EXPECT_EQ(b.endpoints[1].mtu, 1500u);
  EXPECT_EQ(b.endpoints[1].receive_buffer, 1u << 20);
  EXPECT_TRUE(b.endpoints[0].loopback);
}

TEST(UdpAddress, RejectsEveryMalformedBlob) {
  const auto good = encode(rank(1, {eth("eth0", 0x0a000002u, 24, 1500)}));
  Address out;
  for (std::size_t n = 0; n < good.size(); ++n)
    EXPECT_EQ(decode(std::span(good).first(n), out).code(), StatusCode::invalid) << n;
  auto longer = good;
  longer.push_back(std::byte{0});
  EXPECT_EQ(decode(longer, out).code(), StatusCode::invalid);
  auto version = good;
  version[0] = std::byte{9};
  EXPECT_NE(decode(version, out).message().find("version 9"), std::string::npos);
  auto count = good;
  count[2 + 16 + 24] = std::byte{200};
  EXPECT_EQ(decode(count, out).code(), StatusCode::invalid);
}

TEST(UdpPath, UsesLoopbackWhenEveryRankSharesKernelAndNamespace) {
  const std::vector<Address> ranks = {rank(1, {loopback(1), eth("eth0", 0x0a000002u, 24, 1500)}),
                                      rank(1, {loopback(2), eth("eth0", 0x0a000002u, 24, 1500)})};
  Path p;
  ASSERT_TRUE(choose_path(ranks, "", p).ok());
  EXPECT_EQ(p.endpoint, (std::vector<std::size_t>{0, 0}));  // each rank's loopback endpoint
  EXPECT_EQ(p.datagram_bytes, kMaxUdpPayload);
}

TEST(UdpPath, AcrossHostsPicksTheSubnetEveryRankHasAndNeverLoopback) {
  // Rank 1 lists a management network first; only 10.1.0.0/16 reaches everyone.
  const std::vector<Address> ranks = {
      rank(1, {loopback(1), eth("mgmt", 0xc0a80001u, 24, 1500), eth("data", 0x0a010001u, 16, 9000)}),
      rank(2, {loopback(2), eth("data0", 0x0a010202u, 16, 9000), eth("mgmt", 0xc0a80002u, 24, 1500)}),
      rank(3, {loopback(3), eth("ib", 0x0a010303u, 16, 4000)})};
  Path p;
  ASSERT_TRUE(choose_path(ranks, "", p).ok());
  EXPECT_EQ(p.endpoint, (std::vector<std::size_t>{2, 1, 1}));
  EXPECT_EQ(p.datagram_bytes, 4000u - kIpUdpHeaderBytes);  // the smallest MTU of the path
}

TEST(UdpPath, ARoutedNetworkUsesEachRanksFirstOutwardAddress) {
  const std::vector<Address> ranks = {rank(1, {loopback(1), eth("eth0", 0x0a000001u, 24, 1500)}),
                                      rank(2, {loopback(2), eth("eth0", 0x0b000001u, 24, 1500)})};
  Path p;
  ASSERT_TRUE(choose_path(ranks, "", p).ok());
  EXPECT_EQ(p.endpoint, (std::vector<std::size_t>{1, 1}));
  EXPECT_EQ(p.datagram_bytes, 1472u);
}

TEST(UdpPath, RefusesLoopbackAcrossHosts) {
  const std::vector<Address> ranks = {rank(1, {loopback(1), eth("eth0", 0x0a000001u, 24, 1500)}), rank(2, {loopback(2)})};
  Path p;
  const Status s = choose_path(ranks, "", p);
  EXPECT_EQ(s.code(), StatusCode::unavailable);
  EXPECT_NE(s.message().find("ranks 1 have only loopback"), std::string::npos) << s.message();
  // An unknown identity is never taken for this host.
  std::vector<Address> unknown = {rank(1, {loopback(1)}), rank(1, {loopback(2)})};
  unknown[0].host = unknown[1].host = datagram::HostIdentity{};
  EXPECT_FALSE(choose_path(unknown, "", p).ok());
}

TEST(UdpPath, ASmallReceiveBufferGetsSmallerDatagrams) {
  auto ranks_with = [](std::uint32_t buffer, int count) {
    std::vector<Address> ranks;
    for (int r = 0; r < count; ++r) {
      ranks.push_back(rank(1, {loopback(static_cast<std::uint16_t>(r + 1))}));
      ranks.back().endpoints[0].receive_buffer = buffer;
    }
    return ranks;
  };
  Path p;
  ASSERT_TRUE(choose_path(ranks_with(16u << 20, 4), "", p).ok());
  EXPECT_EQ(p.datagram_bytes, kMaxUdpPayload);
  ASSERT_TRUE(choose_path(ranks_with(212992, 4), "", p).ok());  // Linux's default net.core.rmem_max
  EXPECT_EQ(p.datagram_bytes, 7808u);
  ASSERT_TRUE(choose_path(ranks_with(212992, 2), "", p).ok());
  EXPECT_EQ(p.datagram_bytes, 16000u);
  ASSERT_TRUE(choose_path(ranks_with(212992, 64), "", p).ok());
  EXPECT_EQ(p.datagram_bytes, 1664u);  // the smallest it goes
  // One rank's small buffer decides for all: every rank must agree on the size.
  auto mixed = ranks_with(16u << 20, 4);
  mixed[2].endpoints[0].receive_buffer = 212992;
  ASSERT_TRUE(choose_path(mixed, "", p).ok());
  EXPECT_EQ(p.datagram_bytes, 7808u);
}

TEST(UdpPath, TheNamedInterfaceWinsAndMustExistOnEveryRank) {
  const std::vector<Address> ranks = {rank(1, {loopback(1), eth("eth0", 0x0a000001u, 24, 1500)}),
                                      rank(1, {loopback(2), eth("eth0", 0x0a000001u, 24, 1500)})};
  Path p;
  ASSERT_TRUE(choose_path(ranks, "eth0", p).ok());
  EXPECT_EQ(p.endpoint, (std::vector<std::size_t>{1, 1}));  // eth0, though both could use loopback
  const Status s = choose_path(ranks, "eth1", p);
  EXPECT_NE(s.message().find("OPTIREDUCE_UDP_IFACE=\"eth1\": ranks 0, 1"), std::string::npos) << s.message();
}

}  // namespace
}  // namespace optireduce::udp
