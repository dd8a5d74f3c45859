// Transport over UCP active messages: reliable; the engine bounds every wait.
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include "optireduce/transport.hpp"

namespace optireduce {

struct UcxOptions {
  // Largest engine payload; sizes UCX's TCP segments so a chunk travels as one segment.
  std::size_t chunk_bytes = 256u << 10;
};

// Creates a UCP context and worker reading UCX settings under the OPTIREDUCE prefix (UCX applies
// UCX_* first, then OPTIREDUCE_UCX_*). Returns null and sets `error` when UCX cannot start.
std::unique_ptr<Transport> make_ucx_transport(const UcxOptions& options, std::string& error);

// UCX transports this host offers (for optireduce-info), one "transport/device" per entry.
std::vector<std::string> ucx_available_transports();

}  // namespace optireduce
