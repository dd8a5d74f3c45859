// What the udp transport could use on this host, for optireduce-info: the interfaces with the
// datagram size each gives, and the socket buffer limits that size the flow window.
#pragma once

#include <string>
#include <vector>

#include "optireduce/transport_module.hpp"

namespace optireduce::udp {

std::vector<std::string> host_report(const UdpSettings& settings);

}  // namespace optireduce::udp
