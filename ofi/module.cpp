// The ofi transport as a module (liboptireduce-transport-ofi.so): the one exported symbol.
#include "ofi_host_report.hpp"
#include "ofi_transport.hpp"
#include "optireduce/transport_module.hpp"

extern "C" __attribute__((visibility("default"))) const optireduce::TransportModule* optireduce_transport_module_v1() {
  using namespace optireduce;
  return transport_module<&TransportSettings::ofi, &make_started<ofi::OfiTransport, OfiSettings>, &ofi::host_report>("ofi");
}
