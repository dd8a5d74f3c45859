#include "optireduce/engine/tar/wire_header.hpp"

#include "optireduce/byte_order.hpp"
#include "optireduce/wire_prelude.hpp"

namespace optireduce {

void encode(const WireHeader& h, EncodedHeader out) {
  ByteWriter w(out.data());
  WirePrelude{WireHeader::kMagic, WireHeader::kVersion, static_cast<std::uint8_t>(h.kind), h.flags, h.source, h.length}
      .put(w);
  w.put<std::uint64_t>(h.comm_id)
      .put<std::uint64_t>(h.epoch)
      .put<std::uint64_t>(h.total)
      .put<std::uint64_t>(h.offset)
      .put_float(h.stamp_scatter)
      .put_float(h.stamp_gather);
}

ExtentRule extent_rule(MessageKind kind) {
  switch (kind) {
    // Elements of the call: the chunk's.
    case MessageKind::scatter_chunk:
    case MessageKind::gather_chunk:
    // Sent as offset 0: a request's length counts chunk indices, at most the call's elements
    // (inbound.cpp checks its offset and payload); the others' length is 0 (a failure's payload
    // names ranks, not elements; inbound.cpp ignores a "done" or a heartbeat with a length).
    case MessageKind::peer_done:
    case MessageKind::call_failed:
    case MessageKind::resend_request:
    case MessageKind::alive:
      return ExtentRule::within_call;
    case MessageKind::missing_list:
      return ExtentRule::list_bytes;
  }
  return ExtentRule::within_call;
}

bool decode(std::span<const std::byte> in, WireHeader& h) {
  if (in.size() < WireHeader::kEncodedSize) return false;
  ByteReader r(in.data());
  const WirePrelude p = WirePrelude::get(r);
  if (p.magic != WireHeader::kMagic || p.version != WireHeader::kVersion) return false;
  if (p.kind < static_cast<std::uint8_t>(MessageKind::scatter_chunk) || p.kind > static_cast<std::uint8_t>(MessageKind::alive))
    return false;
  h.kind = static_cast<MessageKind>(p.kind);
  h.flags = p.field;
  h.source = p.source;
  h.length = p.length;
  h.comm_id = r.get<std::uint64_t>();
  h.epoch = r.get<std::uint64_t>();
  h.total = r.get<std::uint64_t>();
  h.offset = r.get<std::uint64_t>();
  h.stamp_scatter = r.get_float();
  h.stamp_gather = r.get_float();
  switch (extent_rule(h.kind)) {
    case ExtentRule::within_call: return h.offset <= h.total && h.length <= h.total - h.offset;
    case ExtentRule::list_bytes: return true;  // FillAgreement::piece_of, against the list's geometry
  }
  return false;
}

}  // namespace optireduce
