// Transport over kernel UDP sockets: the fast datagram path on Ethernet. Datagrams as large as
// the path MTU allows without IP fragmentation (~64 KB over loopback; MTU-sized segments joined
// by UDP GSO, split again by GRO, elsewhere), sendmmsg/recvmmsg batches, a flow window per peer
// sized from the receive buffer the kernel granted, pacing from what calibration measured, and
// optionally a parity datagram per group (OPTIREDUCE_FEC) that repairs one loss in it. Truly
// unreliable: it never retransmits. Every datagram is validated and (unless authentication is
// off) tag-checked before the engine sees it.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "address.hpp"
#include "optireduce/datagram/datagram_transport.hpp"
#include "optireduce/transport_module.hpp"
#include "parity_groups.hpp"
#include "receive_path.hpp"
#include "sender.hpp"
#include "udp_socket.hpp"

namespace optireduce::udp {

// A transport with its sockets bound, ready for connect(); null with `status` saying why.
std::unique_ptr<Transport> make_udp_transport(const UdpSettings& settings, Status& status);

class UdpTransport final : public datagram::DatagramTransport {
 public:
  explicit UdpTransport(const UdpSettings& settings);
  Status start();

  Status send(int peer, Lane lane, std::span<const std::byte> header, std::span<const std::byte> payload) override;
  std::size_t sends_in_flight(int peer) const override;
  bool abandon_queued_sends() override;
  Status poll(Clock::time_point deadline, const std::function<void(const InboundMessage&)>& on_message) override;
  std::string describe() const override;
  void suggest_pace(double bytes_per_s) override;

 private:
  struct Candidate {
    Endpoint endpoint;
    UdpSocket socket;
  };

  void reply(int peer, datagram::Kind kind, std::span<const std::byte> body) override;
  void close_parity_group(int peer);
  Status read_addresses(const std::vector<std::vector<std::byte>>& blobs, std::vector<Address>& out) const;
  Status open_paths(const std::vector<std::vector<std::byte>>& addresses) override;
  Status open_path(const std::vector<Address>& all);
  void greet(const std::vector<int>& peers) override;
  void probe_progress() override { progress(); }
  void probe_wait(Clock::time_point until) override { wait(until); }
  std::size_t max_message_bytes() const override;
  void progress(bool readable = true);
  bool wait(Clock::time_point until);

  UdpSettings settings_;
  std::vector<Candidate> candidates_;

  // Set by connect().
  Endpoint endpoint_;
  UdpSocket socket_;
  std::size_t datagram_bytes_ = 0;
  std::unique_ptr<ReceivePath> receive_;
  std::unique_ptr<Sender> sender_;
  ParityGroups parity_;  // with FEC (OPTIREDUCE_FEC)
};

}  // namespace optireduce::udp
