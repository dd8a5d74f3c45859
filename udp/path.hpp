// Which endpoint of each rank the job uses, from every rank's address (every rank sees the same
// addresses, so every rank chooses alike):
//   - the named interface when one is set (UdpSettings::iface), on every rank;
//   - loopback when every rank runs on one kernel in one network namespace;
//   - otherwise the first subnet, in rank 0's order, in which every rank has an address;
//   - otherwise each rank's first non-loopback address (a routed network).
// Never loopback across hosts; host names play no part. The datagram size is the path MTU's,
// made smaller where the smallest receive buffer granted (net.core.rmem_max for unprivileged
// users) would not hold a few datagrams from each sender.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "address.hpp"
#include "optireduce/status.hpp"

namespace optireduce::udp {

inline constexpr std::size_t kIpUdpHeaderBytes = 28;  // IPv4 without options + UDP
inline constexpr std::size_t kMaxUdpPayload = 65507;

struct Path {
  std::vector<std::size_t> endpoint;  // per rank: index into its Address::endpoints
  // Largest datagram every chosen endpoint carries without IP fragmentation, and that every
  // receive buffer holds several of from each sender.
  std::size_t datagram_bytes = 0;
};

Status choose_path(const std::vector<Address>& ranks, const std::string& iface, Path& out);

// The datagram size a path of `path_bytes` gets when the smallest receive buffer granted on it
// is `smallest_buffer`: the path's own, or smaller so that each sender's window holds several.
std::size_t datagram_bytes_for_buffer(std::size_t path_bytes, std::size_t smallest_buffer, int ranks);

}  // namespace optireduce::udp
