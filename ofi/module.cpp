// The ofi transport as a module (liboptireduce-transport-ofi.so): the one exported symbol.
#include "ofi_host_report.hpp"
#include "ofi_transport.hpp"
#include "optireduce/transport_module.hpp"

namespace {

std::unique_ptr<optireduce::Transport> create(const optireduce::TransportSettings& settings, optireduce::Status& status) {
  return optireduce::ofi::make_ofi_transport(settings.ofi, status);
}

std::vector<std::string> describe_host(const optireduce::TransportSettings& settings) {
  return optireduce::ofi::host_report(settings.ofi);
}

}  // namespace

extern "C" __attribute__((visibility("default"))) const optireduce::TransportModule* optireduce_transport_module_v1() {
  static const optireduce::TransportModule module{optireduce::kTransportAbiVersion, "ofi", &optireduce::attach_module_log,
                                                  &create, &describe_host};
  return &module;
}
