#include "transport_factory.hpp"

#include "ucx_transport.hpp"

namespace optireduce {

std::unique_ptr<Transport> make_transport(TransportKind kind, std::size_t message_bytes, std::string& error) {
  switch (kind) {
    case TransportKind::ucx: return make_ucx_transport(message_bytes, error);
  }
  error = "unknown transport";
  return nullptr;
}

}  // namespace optireduce
