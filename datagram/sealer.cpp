#include "sealer.hpp"

namespace optireduce::datagram {

HeaderBytes Sealer::seal(int destination, Kind kind, std::span<const std::byte> header,
                         std::span<const std::byte> payload) {
  Header h;
  h.kind = kind;
  h.source = static_cast<std::uint32_t>(self_);
  h.header_bytes = static_cast<std::uint16_t>(header.size());
  h.payload_bytes = static_cast<std::uint32_t>(payload.size());
  h.sequence = next_[static_cast<std::size_t>(destination)]++;
  HeaderBytes out;
  encode(h, out);
  if (authenticator_) authenticator_->seal(destination, out, header, payload);
  return out;
}

}  // namespace optireduce::datagram
