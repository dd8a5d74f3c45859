#include "dispatch.hpp"

#include "optireduce/byte_order.hpp"

namespace optireduce::datagram {

ReceiveDispatch::ReceiveDispatch(int self, int ranks, Authenticator* authenticator, unsigned fec_group,
                                 std::size_t max_datagram)
    : self_(self), ranks_(ranks), authenticator_(authenticator), fec_group_(fec_group), max_datagram_(max_datagram) {
  if (fec_group_) decoders_.assign(static_cast<std::size_t>(ranks), ParityDecoder(fec_group_, max_datagram_));
}

std::optional<Reject> ReceiveDispatch::check_lengths(const Header& h, std::size_t wire_bytes) const {
  if (wire_bytes > max_datagram_ || Header::kSize + std::size_t{h.header_bytes} + h.payload_bytes != wire_bytes)
    return Reject::bad_length;
  switch (h.kind) {
    case Kind::data:
      return h.header_bytes <= Header::kMaxEngineHeader ? std::nullopt : std::optional(Reject::bad_length);
    case Kind::hello:
      return h.header_bytes == 0 && h.payload_bytes == kHelloBytes ? std::nullopt : std::optional(Reject::bad_length);
    case Kind::ping:
    case Kind::pong:
      return h.header_bytes == 0 && h.payload_bytes == kValueBytes ? std::nullopt : std::optional(Reject::bad_length);
    case Kind::parity:
      if (!fec_group_) return Reject::bad_kind;
      return h.header_bytes >= 2 && h.header_bytes <= ParityEncoder::table_bytes(kMaxFecGroup)
                 ? std::nullopt : std::optional(Reject::bad_length);
  }
  return Reject::bad_kind;
}

std::optional<Reject> ReceiveDispatch::validate(std::span<const std::byte> wire, std::optional<int> origin,
                                                Validated& out) {
  if (origin && *origin < 0) return Reject::unknown_endpoint;
  if (wire.size() < Header::kSize) return Reject::short_datagram;
  if (get_le<std::uint32_t>(wire.data()) != Header::kMagic) return Reject::bad_magic;
  if (std::to_integer<std::uint8_t>(wire[4]) != Header::kVersion) return Reject::bad_version;
  const auto kind = std::to_integer<std::uint8_t>(wire[5]);
  if (kind < 1 || kind > kLastKind) return Reject::bad_kind;
  const auto head = wire.first<Header::kSize>();
  const Header h = decode_fields(head);
  if (auto r = check_lengths(h, wire.size())) return r;
  if (h.source >= static_cast<std::uint32_t>(ranks_) || h.source == static_cast<std::uint32_t>(self_))
    return Reject::bad_source;
  const auto header = wire.subspan(Header::kSize, h.header_bytes);
  const auto payload = wire.subspan(Header::kSize + h.header_bytes);
  if (authenticator_ && !authenticator_->verify(head, header, payload)) return Reject::bad_tag;
  if (origin && *origin != static_cast<int>(h.source)) return Reject::foreign_source;
  out.kind = h.kind;
  out.source = static_cast<int>(h.source);
  out.sequence = h.sequence;
  out.header = header;
  out.payload = payload;
  out.wire = wire;
  return std::nullopt;
}

void ReceiveDispatch::dispatch(const Arrival& arrival, DatagramSink& sink, TransportCounters& counters) {
  Validated d;
  if (auto r = validate(arrival.wire, arrival.origin, d)) {
    count(*r, counters);
    return;
  }
  ++counters.messages_received;
  counters.bytes_received += d.wire.size();
  switch (d.kind) {
    case Kind::hello:
      sink.on_hello(d.source, std::to_integer<std::uint8_t>(d.payload[0]));
      return;
    case Kind::ping:
      sink.on_ping(d.source, decode_value(d.payload.first<kValueBytes>()));
      return;
    case Kind::pong:
      sink.on_pong(d.source, decode_value(d.payload.first<kValueBytes>()));
      return;
    case Kind::data:
      if (fec_group_) decoders_[static_cast<std::size_t>(d.source)].add(d.sequence, d.wire);
      sink.on_data(d.source, d.header, d.payload, arrival.arrived);
      return;
    case Kind::parity:
      repair(d, arrival, sink, counters);
      return;
  }
}

// A rebuilt member claims to be a data datagram of the parity's source: it must prove it, tag
// and all, as if it had arrived from that source's endpoint.
void ReceiveDispatch::repair(const Validated& parity, const Arrival& arrival, DatagramSink& sink,
                             TransportCounters& counters) {
  auto& decoder = decoders_[static_cast<std::size_t>(parity.source)];
  if (!decoder.repair(parity.sequence, parity.header, parity.payload, rebuilt_)) return;
  Validated d;
  if (auto r = validate(rebuilt_, parity.source, d)) {
    count(*r, counters);
    return;
  }
  if (d.kind != Kind::data) {
    count(Reject::bad_kind, counters);
    return;
  }
  ++counters.fec_repaired;
  decoder.add(d.sequence, d.wire);
  sink.on_data(d.source, d.header, d.payload, arrival.arrived);
}

}  // namespace optireduce::datagram
