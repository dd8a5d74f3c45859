// A call's sending: the header every message of the call carries and the posts to the transport,
// which also keep the heartbeat's record of this rank running.
#include "optireduce/engine/call/tar_call.hpp"

#include "optireduce/engine/tar/schedule.hpp"

namespace optireduce {

Status TarCall::send(int peer, MessageKind kind, const Extent& extent, std::uint16_t flags, const std::byte* base) {
  const std::byte* payload = extent.length ? base + extent.offset * element_bytes_ : nullptr;
  const Lane lane = kind == MessageKind::scatter_chunk || kind == MessageKind::gather_chunk ? Lane::data : Lane::control;
  return post(peer, lane, kind, flags, extent.offset, extent.length, {payload, extent.length * element_bytes_});
}

WireHeader TarCall::header_of(MessageKind kind) const {
  WireHeader h;
  h.kind = kind;
  h.source = static_cast<std::uint32_t>(s_.rank);
  h.comm_id = s_.comm_id;
  h.epoch = s_.epoch;
  h.total = s_.layout.total();
  return h;
}

Status TarCall::post(int peer, Lane lane, MessageKind kind, std::uint16_t flags, std::uint64_t offset, std::uint32_t length,
                     std::span<const std::byte> payload) {
  WireHeader h = header_of(kind);
  h.flags = flags | WireHeader::shape_flags(request_.shape.index());
  h.offset = offset;
  h.length = length;
  h.stamp_scatter = static_cast<float>(s_.my_estimate_us[0]);
  h.stamp_gather = static_cast<float>(s_.my_estimate_us[1]);
  EncodedHeader header = staging_->next_header();
  encode(h, header);
  Status st = transport_.send(peer, lane, header, payload);
  if (st.ok() && lane == Lane::data) path_.staging.note_posted(peer);
  // Sending is running; a gap since this rank last ran (descheduled in the send, or before it)
  // is its own stall, as in its waits. Only a control message leaves at once: data may wait in
  // the transport's queue behind its flow window, so it does not stand in for a heartbeat.
  note_running();
  if (beats() && lane == Lane::control) s_.posted_at[static_cast<std::size_t>(peer)] = last_ran_;
  return st;
}

Status TarCall::send_scatter() {
  auto handler = [this](const InboundMessage& m) { handle(m); };
  Status st;
  std::size_t sent = 0;
  // Take in what arrived after each round of slices (one to every peer).
  for_each_scatter_send(s_.layout, s_.rank, last_slices_, [&](const ScheduledSend& send_to) {
    if (transformed_) s_.hadamard.await_encoded(send_to.peer);
    const Extent e = s_.layout.chunk(send_to.peer, send_to.chunk);
    stage_for_send(e);
    st = send(send_to.peer, MessageKind::scatter_chunk, e, send_to.last_slice ? WireHeader::last_slice_flags(send_to.follow) : 0, scatter_source_);
    if (st.ok() && ++sent % static_cast<std::size_t>(s_.ranks - 1) == 0) {
      Status polled = transport_.poll(Clock::time_point::min(), handler);
      if (!polled.ok() && polled.code() != StatusCode::timeout) st = polled;
    }
    return st.ok();
  });
  return st;
}

}  // namespace optireduce
