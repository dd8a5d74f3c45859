// The udp transport as a module (liboptireduce-transport-udp.so): the one exported symbol.
#include "host_report.hpp"
#include "optireduce/transport_module.hpp"
#include "udp_transport.hpp"

extern "C" __attribute__((visibility("default"))) const optireduce::TransportModule* optireduce_transport_module_v1() {
  using namespace optireduce;
  return transport_module<&TransportSettings::udp, &make_started<udp::UdpTransport, UdpSettings>, &udp::host_report>("udp");
}
