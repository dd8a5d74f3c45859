// The one small interface every transport (ucx/, udp/, ofi/, the in-process test transport)
// implements. The engine drives it from one thread at a time; a transport never calls back into
// the engine except from inside poll().
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <functional>
#include <span>
#include <string>
#include <vector>

#include "optireduce/status.hpp"

namespace optireduce {

using Clock = std::chrono::steady_clock;

// One received message, valid only during the callback that receives it. The transport has
// authenticated it: `source` is the rank it came from (by the endpoint it arrived on or by a
// keyed tag over the whole datagram), never what the message says of itself.
struct InboundMessage {
  int source = -1;
  std::span<const std::byte> header;
  std::size_t payload_size = 0;
  // The payload where the transport holds it in memory (datagrams, eager data): the engine sums
  // from it or copies it once to where it belongs, during the callback.
  std::span<const std::byte> payload;
  bool payload_held = true;
  // Otherwise (a rendezvous payload still at the sender) this fetches it into dst
  // (dst.size() == payload_size) before it returns; false when it could not be had.
  std::function<bool(std::span<std::byte> dst)> fetch;
  // When the transport took the message off the network (what "how late was it" is measured from).
  Clock::time_point arrived{};

  // Copies (or fetches) the payload into dst, whichever way the transport holds it.
  bool copy_payload(std::span<std::byte> dst) const;
};

// Control messages (end-of-call lists, checksums) must not wait behind data: over a stream
// transport a stalled data queue would hold them for a retransmission timeout.
enum class Lane : std::uint8_t { data = 0, control = 1 };

struct TransportTraits {
  bool reliable = true;           // every send that returned ok is delivered unless the peer dies
  bool ordered = true;            // messages to one peer arrive in the order they were sent
  // abandon_queued_sends() releases every buffer a send still references: then the engine may
  // send from memory that goes back to the caller when the call returns.
  bool can_abandon_sends = false;
  std::size_t max_message_bytes = 0;  // largest header + payload one send() may carry
  // Every peer is reached through this host's memory, not a network: then the MPI's own
  // shared-memory allreduce is a contender worth measuring (engine/engine.cpp, the step aside).
  bool shared_memory = false;
};

// The transport's own counters for the report. Monotonic over the transport's life.
struct TransportCounters {
  std::uint64_t messages_sent = 0, messages_received = 0;
  std::uint64_t bytes_sent = 0, bytes_received = 0;
  std::uint64_t send_calls = 0, receive_calls = 0;  // system calls (datagram transports)
  // Buffers those calls returned (udp): fewer than messages_received where the kernel's receive
  // offload (GRO) joined datagrams.
  std::uint64_t receive_buffers = 0;
  // Dropped before the engine saw them.
  std::uint64_t rejected_malformed = 0;         // too short, bad magic, version, kind or length
  std::uint64_t rejected_unauthenticated = 0;   // keyed tag wrong, or not from a known endpoint
  std::uint64_t rejected_foreign_source = 0;    // authenticated, but not from where it claims
  std::uint64_t send_errors = 0;
  std::uint64_t abandoned_sends = 0;            // queued sends dropped at a call's end
  std::uint64_t fec_parity_sent = 0, fec_repaired = 0;
  double pace_bytes_per_s = 0;                  // current pacing rate (0: not paced)
  std::uint64_t rejected() const { return rejected_malformed + rejected_unauthenticated + rejected_foreign_source; }
  // Another transport's counters added in (an engine with two transports reports one set); the
  // pace is the faster one.
  TransportCounters& operator+=(const TransportCounters& o) {
    messages_sent += o.messages_sent, messages_received += o.messages_received;
    bytes_sent += o.bytes_sent, bytes_received += o.bytes_received;
    send_calls += o.send_calls, receive_calls += o.receive_calls, receive_buffers += o.receive_buffers;
    rejected_malformed += o.rejected_malformed, rejected_unauthenticated += o.rejected_unauthenticated;
    rejected_foreign_source += o.rejected_foreign_source;
    send_errors += o.send_errors, abandoned_sends += o.abandoned_sends;
    fec_parity_sent += o.fec_parity_sent, fec_repaired += o.fec_repaired;
    pace_bytes_per_s = pace_bytes_per_s > o.pace_bytes_per_s ? pace_bytes_per_s : o.pace_bytes_per_s;
    return *this;
  }
};

class Transport {
 public:
  virtual ~Transport() = default;

  // Opaque address that peers pass to connect(); may carry a per-job secret (it travels over the
  // job's own MPI, which is trusted).
  virtual std::vector<std::byte> local_address() const = 0;

  // Connects to every peer (addresses indexed by rank; this rank's entry is its own) and waits,
  // until `deadline`, for the connections to be usable in both directions. Connecting eagerly
  // keeps connection set-up (and a lost SYN's 1 s retransmission) out of bounded calls.
  virtual Status connect(int self_rank, const std::vector<std::vector<std::byte>>& addresses,
                         Clock::time_point deadline) = 0;

  // Non-blocking send of header + payload to `peer`. Both buffers must stay untouched until
  // sends_in_flight(peer) drops to the value it had before this call.
  virtual Status send(int peer, Lane lane, std::span<const std::byte> header, std::span<const std::byte> payload) = 0;

  // Sends to `peer` that still reference their buffers (a peer whose sends pile up is stuck).
  virtual std::size_t sends_in_flight(int peer) const = 0;

  // What the transport itself queued for `peer` and has not sent yet: the acknowledgements of
  // what it received from that peer (UCX: a rendezvous payload's, which the sender's send waits
  // for), queued behind this rank's own sends to it. Like them they leave only while this rank
  // polls, so a call does not end before they have (TarCall::peers_served).
  virtual std::size_t acknowledgements_pending(int /*peer*/) const { return 0; }

  // Drops every send not yet handed to the network. True when, after it, no send references a
  // buffer any more (traits().can_abandon_sends); false when the transport cannot drop them.
  virtual bool abandon_queued_sends() { return false; }

  // Makes progress and hands every message that has arrived to `on_message`, returning ok as
  // soon as at least one was delivered, timeout when `deadline` passed first. Blocks on the
  // transport's wait object, never spins for long: several ranks may share a core.
  virtual Status poll(Clock::time_point deadline, const std::function<void(const InboundMessage&)>& on_message) = 0;

  virtual TransportTraits traits() const = 0;

  // Short human description of what was actually selected (e.g. "ucx tcp/lo", "udp eth0 gso").
  virtual std::string describe() const = 0;

  // A hint from the engine: the rate (bytes per second, this rank's sends in all) at which the
  // network moved its exact calls. A transport that paces its sends may follow it.
  virtual void suggest_pace(double /*bytes_per_s*/) {}

  virtual TransportCounters counters() const { return {}; }
};

inline bool InboundMessage::copy_payload(std::span<std::byte> dst) const {
  if (dst.size() != payload_size) return false;
  if (!payload_held) return fetch && fetch(dst);
  if (payload.size() != payload_size) return false;
  if (payload_size) std::memcpy(dst.data(), payload.data(), payload_size);
  return true;
}

}  // namespace optireduce
