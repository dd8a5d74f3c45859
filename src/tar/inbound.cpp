#include "optireduce/engine/tar/inbound.hpp"

namespace optireduce {
namespace {

InboundKind classify_chunk(const InboundMessage& message, const CallView& call, Inbound& in) {
  const WireHeader& h = in.header;
  if (h.total != call.layout->total() || h.shape() != call.shape ||
      message.payload_size != static_cast<std::size_t>(h.length) * call.element_bytes)
    return InboundKind::misplaced;
  // A reduce-scatter has no all-gather.
  if (h.kind == MessageKind::gather_chunk && call.scatter_only) return InboundKind::misplaced;
  const int owner = h.kind == MessageKind::scatter_chunk ? call.rank : static_cast<int>(h.source);
  const auto c = call.layout->chunk_index(owner, h.offset, h.length);
  if (!c) return InboundKind::misplaced;
  in.chunk = *c;
  return h.kind == MessageKind::scatter_chunk ? InboundKind::scatter_chunk : InboundKind::gather_chunk;
}

}  // namespace

Inbound classify(const InboundMessage& message, const CallView& call) {
  Inbound in;
  WireHeader& h = in.header;
  if (!decode(message.header, h)) return in;
  // The transport authenticated the sender; the header must name the same rank.
  if (h.comm_id != call.comm_id || h.source >= static_cast<std::uint32_t>(call.ranks) ||
      h.source == static_cast<std::uint32_t>(call.rank) || message.source != static_cast<int>(h.source)) {
    in.kind = InboundKind::foreign;
    return in;
  }
  if (h.kind == MessageKind::call_failed) {
    // A failure of this call or an earlier one fails the call in progress; one of a later call
    // waits for this rank to get there.
    in.kind = h.epoch > call.epoch ? InboundKind::early : InboundKind::call_failed;
    return in;
  }
  if (h.kind == MessageKind::peer_done && h.length == 0 && h.epoch > call.epoch) {
    // A peer that closed its block of a later call before this rank got there (it owns an empty
    // one): its word waits for this rank like its data.
    in.kind = InboundKind::early;
    return in;
  }
  if (h.kind == MessageKind::peer_done || h.kind == MessageKind::alive) {
    const bool current = h.epoch == call.epoch && call.in_call && h.length == 0;
    in.kind = !current ? InboundKind::ignored : h.kind == MessageKind::alive ? InboundKind::alive : InboundKind::peer_done;
    return in;
  }
  if (h.kind == MessageKind::resend_request) {
    // Only the call in progress can still send anything again; a request is never early (it
    // answers data this rank sent).
    const bool current = h.epoch == call.epoch && call.in_call;
    in.kind = !current ? InboundKind::ignored
              : message.payload_size == std::size_t{h.length} * sizeof(std::uint32_t) && h.offset == 0
                  ? InboundKind::resend_request
                  : InboundKind::misplaced;
    return in;
  }
  if (h.epoch < call.epoch || (h.epoch == call.epoch && !call.in_call)) {
    in.kind = InboundKind::stale;
    return in;
  }
  if (h.epoch > call.epoch) {
    in.kind = InboundKind::early;
    return in;
  }
  in.kind = h.kind == MessageKind::missing_list ? InboundKind::missing_list : classify_chunk(message, call, in);
  return in;
}

}  // namespace optireduce
