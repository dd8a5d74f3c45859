// Opens transport modules (liboptireduce-transport-<name>.so) on first use, from the folder the
// library itself was loaded from, so the build tree and an install prefix work alike. Modules
// stay loaded until the process exits: UCX and libfabric do not support being unloaded.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "optireduce/transport_module.hpp"

namespace optireduce {

// The module named `name` ("ucx", "udp", "ofi"), loading it if needed; null with `status`
// saying why (file missing, wrong ABI). Thread-safe.
const TransportModule* load_transport_module(const std::string& name, Status& status);

// Creates a transport of module `name`.
std::unique_ptr<Transport> create_transport(const std::string& name, const TransportSettings& settings, Status& status);

// Where modules are looked for (the library's own folder), for messages and optireduce-info.
std::string transport_module_dir();

// The modules that could be loaded at all (names), without loading them.
std::vector<std::string> installed_transport_modules();

}  // namespace optireduce
