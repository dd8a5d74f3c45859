// The one symbol liboptireduce-transport-ucx.so exports.
#include "optireduce/ucx/ucx_module.hpp"

extern "C" __attribute__((visibility("default"))) const optireduce::TransportModule* optireduce_transport_module_v1() {
  return &optireduce::ucx::module();
}
