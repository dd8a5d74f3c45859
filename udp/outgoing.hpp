// One datagram waiting to be sent: its sealed header, and the engine's header and payload either
// still in the engine's memory (data, referenced until it is sent) or copied (control kinds).
#pragma once

#include <cstddef>
#include <span>
#include <vector>

#include "optireduce/datagram/wire_format.hpp"

namespace optireduce::udp {

struct Outgoing {
  int peer = -1;
  datagram::HeaderBytes head{};
  std::span<const std::byte> header, payload;
  std::vector<std::byte> copy;  // header then payload, for copied datagrams

  Outgoing() = default;
  Outgoing(Outgoing&&) = default;
  Outgoing& operator=(Outgoing&&) = default;
  Outgoing(const Outgoing&) = delete;  // a copy's views would point into the original
  Outgoing& operator=(const Outgoing&) = delete;

  std::size_t bytes() const { return head.size() + header.size() + payload.size(); }

  static Outgoing referencing(int peer, const datagram::HeaderBytes& head, std::span<const std::byte> header,
                              std::span<const std::byte> payload) {
    Outgoing o;
    o.peer = peer;
    o.head = head;
    o.header = header;
    o.payload = payload;
    return o;
  }

  // The copy's buffer moves with the Outgoing (a moved vector keeps its storage).
  static Outgoing copied(int peer, const datagram::HeaderBytes& head, std::span<const std::byte> header,
                         std::span<const std::byte> payload) {
    Outgoing o;
    o.peer = peer;
    o.head = head;
    o.copy.reserve(header.size() + payload.size());
    o.copy.insert(o.copy.end(), header.begin(), header.end());
    o.copy.insert(o.copy.end(), payload.begin(), payload.end());
    o.header = std::span<const std::byte>(o.copy).first(header.size());
    o.payload = std::span<const std::byte>(o.copy).subspan(header.size());
    return o;
  }
};

}  // namespace optireduce::udp
