// Picks the transport implementation named by the configuration.
#pragma once

#include <memory>
#include <string>

#include "config.hpp"
#include "optireduce/transport.hpp"

namespace optireduce {

std::unique_ptr<Transport> make_transport(const Config& config, std::string& error);

}  // namespace optireduce
