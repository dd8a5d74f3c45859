// The IPv4 interfaces of this host a UDP socket can be bound to, with their subnet and MTU.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "optireduce/status.hpp"

namespace optireduce::udp {

struct LocalInterface {
  std::string name;
  std::uint32_t ip = 0;  // host byte order
  std::uint8_t prefix = 0;
  std::uint32_t mtu = 0;
  bool loopback = false;
};

// Interfaces that are up and have an IPv4 address, loopback first, then in the kernel's order.
Status ipv4_interfaces(std::vector<LocalInterface>& out);

// "192.0.2.2"
std::string ip_text(std::uint32_t ip);

// Whether `ip` lies in the subnet of `base`/`prefix`.
bool same_subnet(std::uint32_t ip, std::uint32_t base, std::uint8_t prefix);

}  // namespace optireduce::udp
