#include "inbound_handler.hpp"

namespace optireduce::datagram {

void InboundHandler::on_hello(int source, std::uint8_t flags) {
  if (!handshake_.on_hello(source, flags)) return;
  const std::byte body[kHelloBytes] = {std::byte{handshake_.flags_for(source)}};
  replies_.reply(source, Kind::hello, body);
}

void InboundHandler::on_ping(int source, std::uint64_t value) {
  // Read in order after everything the peer sent before it: all of that has left the socket.
  replies_.reply(source, Kind::pong, encode_value(value));
}

void InboundHandler::on_pong(int source, std::uint64_t value) { windows_[static_cast<std::size_t>(source)].confirm(value); }

void InboundHandler::on_data(int source, std::span<const std::byte> header, std::span<const std::byte> payload,
                             Clock::time_point arrived) {
  if (on_message_) {
    hand_over(source, header, payload, arrived);
    return;
  }
  if (kept_bytes_ + header.size() + payload.size() > kMaxKeptBytes) return;
  Kept k{source, {}, header.size(), arrived};
  k.bytes.reserve(header.size() + payload.size());
  k.bytes.insert(k.bytes.end(), header.begin(), header.end());
  k.bytes.insert(k.bytes.end(), payload.begin(), payload.end());
  kept_bytes_ += k.bytes.size();
  kept_.push_back(std::move(k));
}

void InboundHandler::hand_over(int source, std::span<const std::byte> header, std::span<const std::byte> payload,
                               Clock::time_point arrived) {
  InboundMessage m;
  m.source = source;
  m.header = header;
  m.payload = payload;
  m.payload_size = payload.size();
  m.payload_held = true;
  m.arrived = arrived;
  ++delivered_;
  (*on_message_)(m);
}

std::size_t InboundHandler::deliver_kept() {
  std::size_t n = 0;
  while (on_message_ && !kept_.empty()) {
    Kept k = std::move(kept_.front());
    kept_.pop_front();
    kept_bytes_ -= k.bytes.size();
    const std::span<const std::byte> bytes(k.bytes);
    hand_over(k.source, bytes.first(k.header_bytes), bytes.subspan(k.header_bytes), k.arrived);
    ++n;
  }
  return n;
}

}  // namespace optireduce::datagram
