// Transport over libfabric datagram endpoints (FI_EP_DGRAM: the udp provider on any host, verbs
// UD or EFA on clusters). Unreliable by design: it never retransmits; what is lost is the
// engine's to compensate. Datagrams are paced, tagged with a per-communicator secret and
// validated before the engine sees them.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "optireduce/transport.hpp"

namespace optireduce {

struct OfiOptions {
  std::string provider;  // empty: the first provider offering FI_EP_DGRAM
  std::string iface;     // empty: loopback when every rank shares this host's loopback, else another
  double rate_bits_per_s = 0;  // 0: pace from suggest_pace(), starting from a conservative default
  unsigned fec_group = 0;      // 0: no parity datagrams
};

std::unique_ptr<Transport> make_ofi_transport(const OfiOptions& options, std::string& error);


}  // namespace optireduce
