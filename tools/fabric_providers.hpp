// libfabric providers that offer datagram endpoints (FI_EP_DGRAM), for optireduce-info.
#pragma once

#include <string>
#include <vector>

namespace optireduce::tools {

struct FabricProvider {
  std::string provider;
  std::string fabric;
  std::string domain;
};

struct FabricProviders {
  std::vector<FabricProvider> providers;  // unique (provider, fabric, domain), in fi_getinfo order
  std::string error;                      // set when the query failed or libfabric is not built in
};

FabricProviders datagram_providers();

}  // namespace optireduce::tools
