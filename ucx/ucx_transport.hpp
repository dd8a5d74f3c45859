// Transport over UCP active messages: reliable; the engine bounds every wait.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "optireduce/transport.hpp"

namespace optireduce {

// Creates a UCP context and worker reading UCX settings under the OPTIREDUCE prefix (UCX applies
// UCX_* first, then OPTIREDUCE_UCX_*). Returns null and sets `error` when UCX cannot start.
std::unique_ptr<Transport> make_ucx_transport(std::string& error);

// UCX transports this host offers (for optireduce-info), one "transport/device" per entry.
std::vector<std::string> ucx_available_transports();

}  // namespace optireduce
