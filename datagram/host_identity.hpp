// Whether two processes can reach each other over loopback: the same kernel (boot id) and the
// same network namespace. Host names are not enough: network namespaces on one machine share them.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>

namespace optireduce::datagram {

struct HostIdentity {
  static constexpr std::size_t kSize = 24;  // boot id, then the namespace's inode (u64)
  bool known = false;
  std::array<std::byte, 16> boot_id{};
  std::uint64_t netns_inode = 0;

  // Unknown identities never match: two hosts that both failed to read theirs are not one host.
  bool same_as(const HostIdentity& other) const {
    return known && other.known && boot_id == other.boot_id && netns_inode == other.netns_inode;
  }
  void encode(std::byte* out) const;
  static HostIdentity decode(const std::byte* in);
};

// This process's identity, from /proc.
HostIdentity this_host();

}  // namespace optireduce::datagram
