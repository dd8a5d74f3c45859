// What one rank tells the others about its libfabric endpoints (local_address()), carried over
// the job's trusted MPI:
//
//   [version u8][flags u8: bit 0 authenticate][secret 16][host identity 24][count u8]
//   count x [loopback u8][name length u8][provider address]
#pragma once

#include <cstddef>
#include <span>
#include <vector>

#include "optireduce/datagram/authenticator.hpp"
#include "optireduce/datagram/host_identity.hpp"
#include "optireduce/status.hpp"

namespace optireduce::ofi {

struct OfiAddress {
  static constexpr std::uint8_t kVersion = 2;
  bool authenticate = true;
  datagram::Secret secret{};
  datagram::HostIdentity host;
  std::vector<std::byte> loopback, outward;  // provider addresses (empty: none)
};

std::vector<std::byte> encode(const OfiAddress& address);

// Strict: every length checked, nothing left over.
Status decode(std::span<const std::byte> blob, OfiAddress& out);

}  // namespace optireduce::ofi
