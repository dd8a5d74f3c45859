// The UCX transport module's table (transport_module.hpp).
#pragma once

#include "optireduce/transport_module.hpp"

namespace optireduce::ucx {

const TransportModule& module();

}  // namespace optireduce::ucx
