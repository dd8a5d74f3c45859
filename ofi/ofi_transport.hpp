// Transport over libfabric datagram endpoints (FI_EP_DGRAM: the udp provider on any host, verbs
// UD or EFA on clusters). Unreliable by design: it never retransmits; what is lost is the
// engine's to compensate. Datagrams are paced, flow-controlled per peer, optionally protected by
// FEC parity, tagged with the job's key and validated by datagram/'s dispatch before the engine
// sees them.
#pragma once

#include <rdma/fabric.h>

#include <deque>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "ofi_address.hpp"
#include "ofi_endpoint.hpp"
#include "optireduce/datagram/datagram_transport.hpp"
#include "optireduce/datagram/fec.hpp"
#include "optireduce/transport_module.hpp"

namespace optireduce::ofi {

class OfiTransport final : public datagram::DatagramTransport {
 public:
  explicit OfiTransport(const OfiSettings& settings);
  ~OfiTransport() override;
  // Opens the candidate endpoints, ready for connect() (make_started makes and starts one).
  Status start();
  std::string describe() const override;

 private:
  struct TxEntry {
    fi_context2 context;  // first: providers that need FI_CONTEXT use the memory we pass
    int peer = -1;
    bool engine_send = false;  // references engine memory: counts in sends_in_flight()
    bool posted = false;       // handed to the provider, completion not yet seen
    std::uint64_t sequence = 0;
    // Provider prefix, datagram header, engine header (and the payload, when copied).
    std::vector<std::byte> head;
    std::span<const std::byte> payload;  // the engine's, when not copied
  };
  enum class Posted { sent, failed, busy };
  struct RxBuffer {
    fi_context2 context;
    std::vector<std::byte> data;
  };

  // Connecting and pacing (ofi_transport.cpp).
  Status choose_endpoint(const std::vector<OfiAddress>& all, bool& use_loopback);
  Status configure(const std::vector<OfiAddress>& all, bool use_loopback);
  Status post_receives();
  Status open_paths(const std::vector<std::vector<std::byte>>& addresses) override;
  void greet(const std::vector<int>& peers) override;
  std::size_t max_message_bytes() const override { return max_message_; }
  void follow_pace(double bytes_per_s) override;

  // Sending (ofi_send.cpp).
  void send_control(int peer, std::span<const std::byte> header, std::span<const std::byte> payload, int copies) override;
  void queue_data(int peer, std::span<const std::byte> header, std::span<const std::byte> payload) override;
  std::size_t sends_referencing(int peer) const override { return in_flight_[static_cast<std::size_t>(peer)]; }
  bool drop_queued_data() override;
  TxEntry* new_entry();
  void queue_datagram(int peer, datagram::Kind kind, std::span<const std::byte> header, std::span<const std::byte> payload,
                      bool by_reference, bool control);
  void close_parity_group(int peer);
  void reply(int peer, datagram::Kind kind, std::span<const std::byte> body) override;
  std::size_t datagram_bytes(const TxEntry* e) const { return e->head.size() - prefix_ + e->payload.size(); }
  Posted post(TxEntry* e);
  void release(TxEntry* e);
  bool flush_control();
  int next_ready_peer(Clock::time_point now);
  void queue_ping_if_due(int peer, std::size_t next_bytes, Clock::time_point now);
  void flush_sends();
  void reap_sends();

  // Receiving (ofi_receive.cpp).
  bool post_receive(RxBuffer& buffer);
  void progress(bool readable) override;
  void drain_receives();
  std::optional<int> origin_of(fi_addr_t from) const;
  bool wait(Clock::time_point until) override;

  OfiSettings settings_;
  std::vector<std::unique_ptr<Endpoint>> candidates_;
  Endpoint* endpoint_ = nullptr;
  std::size_t prefix_ = 0;        // FI_MSG_PREFIX bytes the provider wants in front of each buffer
  std::size_t max_datagram_ = 0;  // the provider's max_msg_size
  std::size_t max_message_ = 0;   // engine header + payload per datagram
  bool copy_payload_ = false;     // the provider takes a single buffer per send
  bool has_source_ = false;       // the provider reports the sender's address (FI_SOURCE)

  std::vector<fi_addr_t> addresses_;
  std::unordered_map<fi_addr_t, int> rank_of_;

  std::vector<std::size_t> in_flight_;
  std::size_t posted_engine_sends_ = 0;       // posted, not completed, referencing engine memory
  std::vector<std::deque<TxEntry*>> queues_;  // per peer: data and parity, in order
  std::deque<TxEntry*> control_;              // hello, ping, pong, control lane: first, outside the window
  int next_peer_ = 0;
  std::vector<std::unique_ptr<TxEntry>> entries_;
  std::vector<TxEntry*> free_entries_;
  std::vector<std::unique_ptr<RxBuffer>> receives_;
  Clock::time_point send_blocked_until_{};
  std::vector<datagram::ParityEncoder> encoders_;  // per destination, with FEC
};

}  // namespace optireduce::ofi
