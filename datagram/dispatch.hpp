// The one receive dispatch of the datagram transports (udp/, ofi/; the fuzz harness drives it
// too): one received datagram in, validated completely before any of it is used (length, magic,
// version, kind, the lengths its kind allows, source, the endpoint it came from, the keyed tag),
// then either a rejection counted into the transport's counters or its pieces handed on by kind.
// Parity datagrams rebuild a lost member, which is validated again like any datagram.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "authenticator.hpp"
#include "fec.hpp"
#include "optireduce/transport.hpp"
#include "reject.hpp"
#include "wire_format.hpp"

namespace optireduce::datagram {

// A datagram that passed validation: views into the bytes it arrived in.
struct Validated {
  Kind kind = Kind::data;
  int source = -1;
  std::uint64_t sequence = 0;
  std::span<const std::byte> header;   // engine header (data), member table (parity)
  std::span<const std::byte> payload;
  std::span<const std::byte> wire;     // the whole datagram
};

// One datagram as a transport took it off the network.
struct Arrival {
  std::span<const std::byte> wire;
  // The rank whose endpoint it came from: -1 when the address is no rank's, none when the
  // transport cannot tell (the datagram's tag alone then vouches for its source).
  std::optional<int> origin;
  Clock::time_point arrived{};
};

// What the transport does with each kind; called only with validated datagrams.
class DatagramSink {
 public:
  virtual ~DatagramSink() = default;
  virtual void on_hello(int source, std::uint8_t flags) = 0;
  virtual void on_ping(int source, std::uint64_t value) = 0;
  virtual void on_pong(int source, std::uint64_t value) = 0;
  virtual void on_data(int source, std::span<const std::byte> header, std::span<const std::byte> payload,
                       Clock::time_point arrived) = 0;
};

class ReceiveDispatch {
 public:
  // `authenticator` null: tags are not checked (OPTIREDUCE_AUTH=off). `fec_group` 0: parity
  // datagrams are not expected. `max_datagram`: the largest datagram the path carries.
  ReceiveDispatch(int self, int ranks, Authenticator* authenticator, unsigned fec_group, std::size_t max_datagram);

  // Validation alone: no state changes.
  std::optional<Reject> validate(std::span<const std::byte> wire, std::optional<int> origin, Validated& out);

  // Validates `arrival`; a rejection is counted into `counters`, anything else goes to `sink`.
  void dispatch(const Arrival& arrival, DatagramSink& sink, TransportCounters& counters);

 private:
  std::optional<Reject> check_lengths(const Header& h, std::size_t wire_bytes) const;
  void repair(const Validated& parity, const Arrival& arrival, DatagramSink& sink, TransportCounters& counters);

  int self_;
  int ranks_;
  Authenticator* authenticator_;
  unsigned fec_group_;
  std::size_t max_datagram_;
  std::vector<ParityDecoder> decoders_;  // per source, with FEC
  std::vector<std::byte> rebuilt_;
};

}  // namespace optireduce::datagram
