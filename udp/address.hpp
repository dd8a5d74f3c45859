// What one rank tells the others about its UDP endpoints (local_address()), carried over the
// job's trusted MPI:
//
//   [version u8][flags u8: bit 0 authenticate, bits 1-5 FEC group][secret 16][host identity 24][count u8]
//   count x [ip u32][port u16][prefix u8][loopback u8][mtu u32][receive buffer u32]
//           [name length u8][interface name]
//
// One endpoint per interface this rank could use; connect() picks one per rank from all of them.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "optireduce/datagram/authenticator.hpp"
#include "local_interfaces.hpp"
#include "optireduce/datagram/host_identity.hpp"
#include "optireduce/status.hpp"

namespace optireduce::udp {

// One of a rank's interfaces (its name, address, subnet, MTU) with the socket bound on it.
struct Endpoint : LocalInterface {
  std::uint16_t port = 0;
  std::uint32_t receive_buffer = 0;  // what the kernel granted this endpoint's socket: sizes its senders' windows
};

struct Address {
  static constexpr std::uint8_t kVersion = 1;
  static constexpr std::size_t kMaxEndpoints = 16;
  bool authenticate = true;
  unsigned fec_group = 0;  // 0..31 (datagram/fec.hpp allows up to kMaxFecGroup)
  datagram::Secret secret{};
  datagram::HostIdentity host;
  std::vector<Endpoint> endpoints;
};

std::vector<std::byte> encode(const Address& address);

// Strict: every length checked, nothing left over.
Status decode(std::span<const std::byte> blob, Address& out);

}  // namespace optireduce::udp
