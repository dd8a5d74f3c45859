// The UCX transport's class: UCP active messages over one worker per transport, the shared
// context of ucx_context.hpp. Private to ucx/ (make_transport in ucx_transport.hpp builds it).
#pragma once

#include <ucp/api/ucp.h>

#include <chrono>
#include <deque>
#include <memory>
#include <string>
#include <vector>

#include "optireduce/transport.hpp"
#include "optireduce/transport_module.hpp"
#include "optireduce/ucx/ucx_context.hpp"
#include "optireduce/ucx/ucx_send_protocol.hpp"

namespace optireduce::ucx::detail {

constexpr unsigned kDataAmId = 0x4f52;   // engine messages
constexpr unsigned kHelloAmId = 0x4f53;  // connection handshake
// Spin on progress this long before blocking on the event fd: a message in flight usually lands
// within it, and blocking costs a system call and a wake-up.
constexpr auto kSpinBeforeBlock = std::chrono::microseconds(50);
// A rendezvous fetch is one transfer from a peer that is alive and in the call; this bounds it.
constexpr auto kFetchTimeout = std::chrono::seconds(10);
// Then the fetch is cancelled and waited for this much longer at most; a fetch still not done
// after it is abandoned, and the transport with it (UcxTransport::abandon_fetch).
constexpr auto kAfterCancel = std::chrono::seconds(1);
// Longest single block, so transports without wake-up events still get progressed.
constexpr auto kMaxBlock = std::chrono::milliseconds(5);
// While this rank's own sends are in flight, UCX may need progress to push them on (a TCP socket
// that was full becomes writable without an event on the worker's fd): block only this long.
constexpr auto kMaxBlockWhileSending = std::chrono::microseconds(200);
// Closing waits at most this for the sends of the last bounded calls to drain.
constexpr auto kCloseTimeout = std::chrono::seconds(2);

class UcxTransport final : public Transport {
 public:
  ~UcxTransport() override;

  Status start(const UcxSettings& settings);
  std::vector<std::byte> local_address() const override { return address_; }
  Status connect(int self_rank, const std::vector<std::vector<std::byte>>& peers, Clock::time_point deadline) override;
  Status send(int peer, Lane lane, std::span<const std::byte> header, std::span<const std::byte> payload) override;
  std::size_t sends_in_flight(int peer) const override { return in_flight_.at(peer); }
  std::size_t acknowledgements_pending(int peer) const override;
  Status poll(Clock::time_point deadline, const std::function<void(const InboundMessage&)>& on_message) override;
  TransportTraits traits() const override { return {true, true, false, std::size_t{1} << 30, shared_memory_}; }
  std::string describe() const override { return description_; }
  TransportCounters counters() const override { return counters_; }
  // For tests: the fetch's bounds (kFetchTimeout, kAfterCancel), shorter.
  void shorten_fetch_bounds(Clock::duration fetch, Clock::duration after_cancel) {
    fetch_timeout_ = fetch;
    after_cancel_ = after_cancel;
  }

 private:
  struct Arrived {
    int source = -1;
    std::vector<std::byte> header;
    void* ucx_data = nullptr;      // persistent UCX data or rendezvous descriptor
    bool rendezvous = false;       // payload still at the sender: fetch it into its destination
    bool fetched = false;
    std::vector<std::byte> copy;   // used when UCX could not keep the data for us
    std::size_t length = 0;
    Clock::time_point arrived;
  };
  struct SendContext {
    UcxTransport* self;
    int peer;
  };
  // A send the engine made while a message was delivered from inside a UCX callback, where UCX
  // must not be entered again: posted once progress has returned. Counted in in_flight_ from the
  // start, so the engine keeps its buffers as it would for a posted send.
  struct DeferredSend {
    int peer;
    std::span<const std::byte> header, payload;
  };

  static ucs_status_t on_data(void* arg, const void* header, std::size_t header_length, void* data,
                              std::size_t length, const ucp_am_recv_param_t* param);
  static ucs_status_t on_hello(void* arg, const void* header, std::size_t header_length, void* data,
                               std::size_t length, const ucp_am_recv_param_t* param);
  static void on_send_done(void* request, ucs_status_t status, void* user_data);
  static void on_peer_error(void* arg, ucp_ep_h ep, ucs_status_t status);

  int rank_of(ucp_ep_h ep) const;
  Status post(int peer, unsigned am_id, std::span<const std::byte> header, std::span<const std::byte> payload);
  void deliver(Arrived& a, const std::function<void(const InboundMessage&)>& on_message);
  bool delivers_in_callback() const { return handler_ && !delivering_ && inbox_.empty(); }
  void deliver_in_callback(int source, std::span<const std::byte> header, std::span<const std::byte> payload);
  // Counts a message and hands it to the engine; nothing is delivered inside it.
  void hand_over(const InboundMessage& m, const std::function<void(const InboundMessage&)>& on_message);
  unsigned progress_once();
  void post_deferred();
  bool fetch(Arrived& a, std::span<std::byte> dst);
  // Gives up a fetch that did not complete, and with it the transport: never progressed again.
  void abandon_fetch(void* request, int source, std::size_t bytes);
  void push_out(int peer);
  // Frees the flushes push_out() left that have completed; true when there were any.
  bool reap_flushes();
  void progress_all();
  // What a wait does when the worker will not arm (UCX's shared-memory transports refuse while a
  // send waits for room in a peer's FIFO; the unarmed fd reads as ready): progress again at once
  // (poll(): the yield-spin keeps the engine's calls fast), or sleep briefly (waits that only
  // need a peer to drain a queue: that peer may need this core).
  enum class WhenBusy { progress_again, sleep };
  void wait_for_events(Clock::time_point deadline, WhenBusy when_busy = WhenBusy::progress_again);
  bool handshake_done(int self_rank) const;
  void close();
  // Flushes the worker and force-closes every endpoint, progressing until `deadline` at most.
  void close_endpoints(Clock::time_point deadline);

  std::shared_ptr<SharedContext> context_;
  ucp_worker_h worker_ = nullptr;
  int event_fd_ = -1;
  std::vector<std::byte> address_;
  std::vector<ucp_ep_h> endpoints_;
  std::vector<std::size_t> in_flight_;
  std::vector<SendContext> send_contexts_;
  std::vector<std::uint8_t> hello_from_;
  std::deque<Arrived> inbox_;
  bool failed_ = false;
  bool abandoned_ = false;  // a fetch was given up: the worker is never progressed again
  Clock::duration fetch_timeout_ = kFetchTimeout, after_cancel_ = kAfterCancel;
  std::uint64_t sends_completed_ = 0;  // counted by on_send_done; poll() returns when it moves
  std::uint64_t received_rendezvous_ = 0;  // payloads fetched or refused at the sender
  Clock::time_point poll_deadline_{};      // of the poll() delivering now: push_out() keeps to it
  struct Flush {
    int peer;
    void* request;
  };
  std::vector<Flush> flushes_;  // push_out() flushes still in flight, freed once done
  std::int32_t hello_header_ = -1;  // read by UCX until the hello sends complete
  std::string description_ = "ucx (not connected)";
  bool shared_memory_ = false;  // every lane of every endpoint is a shared-memory transport
  SendProtocol protocol_;  // eager until connect() chooses
  TransportCounters counters_;
  // While poll() runs: where a message that UCX can lend only for its callback is delivered at
  // once, instead of being copied for delivery after the callback (the copy of every eager
  // payload that fits one tcp segment).
  const std::function<void(const InboundMessage&)>* handler_ = nullptr;
  bool delivering_ = false;         // the engine is handling a message: deliver nothing inside it
  bool in_callback_ = false;        // sends now are deferred
  std::uint64_t delivered_ = 0;     // messages delivered from callbacks: poll() returns when it moves
  std::vector<DeferredSend> deferred_;
};

}  // namespace optireduce::ucx::detail
