#include "transport_factory.hpp"

#include "ucx_transport.hpp"

namespace optireduce {

std::unique_ptr<Transport> make_transport(TransportKind kind, std::string& error) {
  switch (kind) {
    case TransportKind::ucx: return make_ucx_transport(error);
  }
  error = "unknown transport";
  return nullptr;
}

}  // namespace optireduce
