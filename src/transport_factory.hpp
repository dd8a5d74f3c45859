// Picks the transport implementation named by the configuration.
#pragma once

#include <memory>
#include <string>

#include "config.hpp"
#include "optireduce/transport.hpp"

namespace optireduce {

// `message_bytes`: the largest payload the engine will send in one message.
std::unique_ptr<Transport> make_transport(TransportKind kind, std::size_t message_bytes, std::string& error);

}  // namespace optireduce
