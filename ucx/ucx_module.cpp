// The UCX module's table: what the library calls after dlopen.
#include "optireduce/ucx/ucx_module.hpp"

#include "optireduce/ucx/ucx_context.hpp"
#include "optireduce/ucx/ucx_transport.hpp"

namespace optireduce::ucx {

const TransportModule& module() {
  static const TransportModule m = [] {
    TransportModule t;
    t.name = "ucx";
    t.attach = &attach_module_log;
    t.create = [](const TransportSettings& s, Status& status) { return make_transport(s.ucx, status); };
    t.describe_host = [](const TransportSettings&) { return available_transports(); };
    return t;
  }();
  return m;
}

}  // namespace optireduce::ucx
