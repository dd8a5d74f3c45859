// What UCX chose to reach the peers: the lanes of the endpoints, as the report and the engine's
// choices (shared memory or a network) need them.
#pragma once

#include <ucp/api/ucp.h>

#include <string>
#include <vector>

namespace optireduce::ucx {

// The distinct "transport/device" names of the endpoints' lanes, e.g. "cma/memory.0,sysv/memory.0"
// ("ucx" when UCX tells nothing).
std::string lanes_in_use(const std::vector<ucp_ep_h>& endpoints);
// Whether every one of those is a transport through this host's memory.
bool only_shared_memory(const std::string& lanes);
// Whether one of those copies straight between two processes' memory (cma, xpmem, knem): what a
// rendezvous over shared memory reads with.
bool has_single_copy(const std::string& lanes);

}  // namespace optireduce::ucx
