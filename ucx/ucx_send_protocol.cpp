#include "optireduce/ucx/ucx_send_protocol.hpp"

#include <ucp/api/ucp.h>

#include "optireduce/log.hpp"
#include "optireduce/ucx/ucx_lanes.hpp"

namespace optireduce::ucx {

SendProtocol SendProtocol::choose(const std::string& lanes, bool user_threshold) {
  if (!only_shared_memory(lanes)) {
    if (user_threshold)
      OR_LOG(info, "the UCX rendezvous threshold applies to shared memory only: the engine's messages over %s go eager",
             lanes.c_str());
    return SendProtocol(Kind::eager);
  }
  if (user_threshold) return SendProtocol(Kind::ucx_choice);
  return SendProtocol(has_single_copy(lanes) ? Kind::rendezvous_when_large : Kind::eager);
}

unsigned SendProtocol::flag(std::size_t payload_bytes) const {
  // Eager needs no per-message handshake with both sides scheduled (several ranks on few cores
  // make every round trip expensive): a message takes it unless a rendezvous saves copies.
  switch (kind_) {
    case Kind::ucx_choice:
      return 0;
    case Kind::rendezvous_when_large:
      return payload_bytes >= kSharedMemoryRendezvousBytes ? UCP_AM_SEND_FLAG_RNDV : UCP_AM_SEND_FLAG_EAGER;
    case Kind::eager:
      break;
  }
  return UCP_AM_SEND_FLAG_EAGER;
}

}  // namespace optireduce::ucx
