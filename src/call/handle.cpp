// What a call does with each message that arrives: classified first (tar/inbound.hpp), then handed
// to the phase, the fill agreement or the failure protocol it belongs to.
#include <chrono>

#include "optireduce/engine/call/tar_call.hpp"

namespace optireduce {

CallView TarCall::view() const {
  return {s_.rank, s_.ranks, s_.comm_id, s_.epoch, s_.in_call, &s_.layout, s_.shape.index(), s_.shape.element_bytes(),
          s_.shape.scatter_only()};
}

void TarCall::handle(const InboundMessage& message) {
  const Inbound in = classify(message, view());
  if (in.kind == InboundKind::malformed) {
    ++s_.rejects.malformed;
    return;
  }
  if (in.kind == InboundKind::foreign) {
    ++s_.rejects.foreign;
    return;
  }
  // Whatever it is, an authentic message says its sender runs.
  note_alive(in.header.source, message.arrived);
  switch (in.kind) {
    case InboundKind::malformed:
    case InboundKind::foreign: return;
    case InboundKind::alive: note_heard(in.header.source, message.arrived); return;
    case InboundKind::stale:
      ++s_.rejects.stale;
      // Only data counts as what the deadline did not wait for; control messages (the second
      // copy of a missing list, a done) come after a call by design.
      if (in.header.kind == MessageKind::scatter_chunk || in.header.kind == MessageKind::gather_chunk)
        s_.note_late(in.header.epoch, message.arrived, message.payload_size);
      if (in.header.kind == MessageKind::missing_list) answer_late_ask(in.header);
      return;
    case InboundKind::misplaced: ++s_.rejects.misplaced; return;
    case InboundKind::ignored: return;
    case InboundKind::early:
      if (!s_.early.keep(in.header, s_.epoch, message)) ++s_.rejects.overflow;
      return;
    case InboundKind::peer_done:
      note_heard(in.header.source, message.arrived);
      s_.done_from[in.header.source] = 1;
      return;
    case InboundKind::scatter_chunk: note_heard(in.header.source, message.arrived); return on_scatter_chunk(in, message);
    case InboundKind::gather_chunk: note_heard(in.header.source, message.arrived); return on_gather_chunk(in, message);
    case InboundKind::missing_list: note_heard(in.header.source, message.arrived); return on_missing_list(in, message);
    case InboundKind::call_failed: return on_call_failed(in, message);
    case InboundKind::resend_request: note_heard(in.header.source, message.arrived); return on_resend_request(in, message);
  }
}

void TarCall::note_heard(std::uint32_t source, Clock::time_point arrived) {
  if (!s_.in_call || source >= s_.heard_from.size() || s_.heard_from[source]) return;
  s_.heard_from[source] = 1;
  if (--unheard_ == 0) all_heard_at_ = arrived;
}

void TarCall::on_scatter_chunk(const Inbound& in, const InboundMessage& message) {
  const int source = static_cast<int>(in.header.source);
  s_.stamps.note(in.header.source, in.header.stamp_scatter, in.header.stamp_gather);
  if (in.header.last_slice()) s_.last_slices[0].note(source, in.header.slices_to_follow(), message.arrived);
  if (injects_faults() && s_.faults.drop_received_chunk()) return;
  switch (s_.scatter.accept(source, in.chunk, message)) {
    case Accepted::duplicate: ++s_.rejects.duplicate; break;
    case Accepted::closed:
      ++s_.rejects.stale;
      s_.late.add(s_.epoch, std::chrono::duration<double, std::micro>(message.arrived - scatter_closed_).count(),
                  message.payload_size);
      break;
    case Accepted::taken: last_arrival_ = message.arrived; break;
    case Accepted::unreadable: break;
  }
}

void TarCall::on_gather_chunk(const Inbound& in, const InboundMessage& message) {
  const int owner = static_cast<int>(in.header.source);
  s_.stamps.note(in.header.source, in.header.stamp_scatter, in.header.stamp_gather);
  if (in.header.last_slice()) s_.last_slices[1].note(owner, in.header.slices_to_follow(), message.arrived);
  if (injects_faults() && s_.faults.drop_received_chunk()) return;
  if (s_.gather.has(owner, in.chunk)) {
    ++s_.rejects.duplicate;
    return;
  }
  // An owner whose deadline passed without this rank's contribution may answer before this
  // rank's encode of that shard is done.
  if (transformed_) s_.hadamard.await_encoded(owner);
  if (s_.gather.accept(owner, in.chunk, message, gather_target()) != Accepted::taken) return;
  last_arrival_ = message.arrived;
  if (transformed_ && s_.gather.shard_complete(owner)) s_.hadamard.shard_final(owner);
  if (in.header.partial()) s_.ledger.drop(s_.ledger.global_chunk(owner, in.chunk), in.header.length);
}

void TarCall::on_missing_list(const Inbound& in, const InboundMessage& message) {
  s_.stamps.note(in.header.source, in.header.stamp_scatter, in.header.stamp_gather);
  const auto piece = bounded() ? s_.fill.piece_of(in.header, message.payload_size) : std::nullopt;
  if (!piece) {
    ++s_.rejects.misplaced;
    return;
  }
  const int source = static_cast<int>(in.header.source);
  s_.fill.accept(source, *piece, in.header, message);
  // The peer's all-gather has closed: it needs nothing more from this rank (as a peer_done says).
  s_.done_from[in.header.source] = 1;
  if (in.header.flags & WireHeader::kFlagDecided) s_.fill.note_decided(source);
  if ((in.header.flags & WireHeader::kFlagWantsAnswer) && sent_list_ && answers_[in.header.source] < kMostAsks) {
    ++answers_[in.header.source];
    send_list(source, list_known() ? WireHeader::kFlagDecided : 0);
  }
}

}  // namespace optireduce
