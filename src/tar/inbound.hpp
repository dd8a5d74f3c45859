// What an arriving message is, decided once and before anything changes: every field of its
// header is checked against the communicator and the call in progress.
#pragma once

#include <cstdint>

#include "optireduce/engine/tar/shard_layout.hpp"
#include "optireduce/engine/tar/wire_header.hpp"
#include "optireduce/transport.hpp"

namespace optireduce {

enum class InboundKind {
  malformed,      // header failed to decode
  foreign,        // other communicator, impossible or self source, or not from where it claims
  stale,          // a call that is over (or between calls: the caller's buffer is theirs)
  early,          // a later call (a peer ahead of this rank)
  ignored,        // a "done" of another call: normal once sends drained
  misplaced,      // extent, payload length or call shape not a chunk this rank expects
  peer_done,
  scatter_chunk,  // `chunk` is the index within this rank's shard
  gather_chunk,   // `chunk` is the index within the sender's shard
  missing_list,   // geometry is checked by the fill agreement
  call_failed,    // a peer gave up on this call (or an earlier one this rank has left)
  resend_request, // a peer asks for chunks of the call in progress again (list checked by tar/resend.hpp)
  alive,          // a peer's heartbeat in the call in progress
};

struct Inbound {
  InboundKind kind = InboundKind::malformed;
  WireHeader header;
  std::uint32_t chunk = 0;
};

// What the classification compares against.
struct CallView {
  int rank = 0;
  int ranks = 1;
  std::uint64_t comm_id = 0;
  std::uint64_t epoch = 0;  // the call in progress, or the last one
  bool in_call = false;
  const ShardLayout* layout = nullptr;  // of the call in progress
  unsigned shape = 0;                   // of the call in progress (CallShape::index)
  std::size_t element_bytes = 4;        // of its elements
  bool scatter_only = false;            // a reduce-scatter: no all-gather
};

Inbound classify(const InboundMessage& message, const CallView& call);

}  // namespace optireduce
