// The one small interface every transport (ucx/, ofi/, the in-process test transport) implements.
// The engine drives it from a single thread at a time; a transport never calls back into the
// engine except from inside poll().
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <utility>
#include <vector>

namespace optireduce {

using Clock = std::chrono::steady_clock;

// One received message, valid only during the callback that receives it. The receiver validates
// the header first and then asks for the payload to be placed where it belongs: a transport may
// hold it already (copied out) or fetch it only now (zero-copy rendezvous), so nothing is copied
// before the receiver has decided the message is genuine and where it goes.
struct InboundMessage {
  int source = -1;  // rank the transport believes sent it (may be -1 when it cannot tell)
  std::span<const std::byte> header;
  std::size_t payload_size = 0;
  // Writes exactly payload_size bytes to dst (dst.size() must equal payload_size) before it
  // returns; false when the payload could not be had (nothing usable was written).
  std::function<bool(std::span<std::byte> dst)> receive_into;
};

enum class TransportStatus { ok, timeout, error };

class Transport {
 public:
  virtual ~Transport() = default;

  // Opaque address that peers pass to connect().
  virtual std::vector<std::byte> local_address() const = 0;

  // Connects to every peer (addresses indexed by rank; the entry of this rank is ignored) and
  // waits, until `deadline`, for the connections to be usable in both directions. Connecting
  // eagerly keeps connection set-up (and a lost SYN's 1 s retransmission) out of bounded calls.
  virtual TransportStatus connect(int self_rank, const std::vector<std::vector<std::byte>>& peers,
                                  Clock::time_point deadline) = 0;

  // Non-blocking send of header + payload to `peer`. Both buffers must stay untouched until
  // sends_in_flight(peer) drops to the value it had before this call; the engine only passes its
  // own staging memory, never a user buffer.
  virtual TransportStatus send(int peer, std::span<const std::byte> header,
                               std::span<const std::byte> payload) = 0;

  // Sends to `peer` that have not completed yet (a peer whose sends pile up is stuck).
  virtual std::size_t sends_in_flight(int peer) const = 0;

  // Drops every send not yet handed to the network, so none of them reads its buffers any more
  // (sends_in_flight() drops accordingly). Only a transport that may lose data anyway can do it;
  // the others return false and keep their sends.
  virtual bool abandon_queued_sends() { return false; }

  // Makes progress and hands every message that has arrived to `on_message`, returning as soon
  // as at least one was delivered or `deadline` passed. Waits by blocking on the transport's
  // wait object, not by spinning: several ranks may share a core.
  virtual TransportStatus poll(Clock::time_point deadline,
                               const std::function<void(const InboundMessage&)>& on_message) = 0;

  // Largest header + payload one send() may carry.
  virtual std::size_t max_message_bytes() const = 0;

  // True when every send() that returned ok is delivered unless the peer dies.
  virtual bool reliable() const = 0;

  // Short human description of what was actually selected (e.g. "tcp/lo").
  virtual std::string describe() const = 0;

  // A hint from the engine: the rate (bytes per second, this rank's sends in all) at which the
  // network moved its exact calls. A transport that paces its sends may follow it; others ignore it.
  virtual void suggest_pace(double /*bytes_per_s*/) {}

  // The transport's own counters for the report (e.g. datagrams rejected, by reason), by name.
  virtual std::vector<std::pair<std::string, std::uint64_t>> counters() const { return {}; }
};

}  // namespace optireduce
