// Transport over UCP active messages: reliable and ordered; the engine bounds every wait.
#pragma once

#include <memory>

#include "optireduce/transport_module.hpp"

namespace optireduce::ucx {

// A worker on the process's shared context, ready for connect(); null with `status` when UCX
// cannot start.
std::unique_ptr<Transport> make_transport(const UcxSettings& settings, Status& status);

}  // namespace optireduce::ucx
