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

class UdpTransport final : public datagram::DatagramTransport {
 public:
  explicit UdpTransport(const UdpSettings& settings);
  // Binds the sockets, ready for connect() (make_started makes and starts one).
  Status start();
  std::string describe() const override;

 private:
  struct Candidate {
    Endpoint endpoint;
    UdpSocket socket;
  };

  // Connecting (udp_connect.cpp).
  Status read_addresses(const std::vector<std::vector<std::byte>>& blobs, std::vector<Address>& out) const;
  Status open_paths(const std::vector<std::vector<std::byte>>& addresses) override;
  Status open_path(const std::vector<Address>& all);
  void greet(const std::vector<int>& peers) override;

  // Sending, receiving and pacing (udp_transport.cpp), through the Sender and the ReceivePath.
  void send_control(int peer, std::span<const std::byte> header, std::span<const std::byte> payload, int copies) override;
  void queue_data(int peer, std::span<const std::byte> header, std::span<const std::byte> payload) override;
  void reply(int peer, datagram::Kind kind, std::span<const std::byte> body) override;
  void close_parity_group(int peer);
  std::size_t sends_referencing(int peer) const override;
  bool drop_queued_data() override;
  void progress(bool readable) override;
  bool wait(Clock::time_point until) override;
  void follow_pace(double bytes_per_s) override;
  std::size_t max_message_bytes() const override;

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
