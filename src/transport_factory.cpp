#include "transport_factory.hpp"

#include "ofi_transport.hpp"
#include "ucx_transport.hpp"

namespace optireduce {

std::unique_ptr<Transport> make_transport(const Config& config, std::string& error) {
  switch (config.transport) {
    case TransportKind::ucx: {
      UcxOptions o;
      o.chunk_bytes = config.chunk_bytes;
      return make_ucx_transport(o, error);
    }
    case TransportKind::ofi: {
      OfiOptions o;
      o.provider = config.ofi_provider;
      o.iface = config.ofi_iface;
      o.rate_bits_per_s = config.rate_bits_per_s;
      o.fec_group = config.fec_group;
      return make_ofi_transport(o, error);
    }
  }
  error = "unknown transport";
  return nullptr;
}

}  // namespace optireduce
