// What the ofi transport could use on this host, for optireduce-info: the datagram endpoints
// libfabric offers, by provider and domain, and which one the settings pick.
#pragma once

#include <string>
#include <vector>

#include "optireduce/transport_module.hpp"

namespace optireduce::ofi {

std::vector<std::string> host_report(const OfiSettings& settings);

}  // namespace optireduce::ofi
