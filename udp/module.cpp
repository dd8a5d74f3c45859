// The udp transport as a module (liboptireduce-transport-udp.so): the one exported symbol.
#include "host_report.hpp"
#include "optireduce/transport_module.hpp"
#include "udp_transport.hpp"

namespace {

std::unique_ptr<optireduce::Transport> create(const optireduce::TransportSettings& settings, optireduce::Status& status) {
  return optireduce::udp::make_udp_transport(settings.udp, status);
}

std::vector<std::string> describe_host(const optireduce::TransportSettings& settings) {
  return optireduce::udp::host_report(settings.udp);
}

}  // namespace

extern "C" __attribute__((visibility("default"))) const optireduce::TransportModule* optireduce_transport_module_v1() {
  static const optireduce::TransportModule module{optireduce::kTransportAbiVersion, "udp", &optireduce::attach_module_log,
                                                  &create, &describe_host};
  return &module;
}
