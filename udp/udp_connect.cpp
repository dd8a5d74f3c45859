// UdpTransport's steps of connect(): every rank's address read, the path chosen, the socket it needs
// kept; the reachability probe's hellos.
#include <arpa/inet.h>

#include <algorithm>

#include "local_interfaces.hpp"
#include "optireduce/log.hpp"
#include "path.hpp"
#include "udp_transport.hpp"

namespace optireduce::udp {
namespace {

sockaddr_in socket_address(const Endpoint& e) {
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(e.ip);
  a.sin_port = htons(e.port);
  return a;
}

}  // namespace

Status UdpTransport::read_addresses(const std::vector<std::vector<std::byte>>& blobs, std::vector<Address>& out) const {
  OR_RETURN_IF_ERROR(DatagramTransport::read_addresses(blobs, settings_.authenticate, out));
  for (std::size_t r = 0; r < out.size(); ++r) {
    // Every rank sends parity, or none: the datagram sizes (so the chunks) depend on it.
    OR_CHECK(out[r].fec_group == settings_.fec_group, invalid,
             "OPTIREDUCE_FEC differs between ranks (rank " + std::to_string(r) + " has " + std::to_string(out[r].fec_group) +
                 ", rank " + std::to_string(rank_) + " " + std::to_string(settings_.fec_group) + ")");
  }
  return Status::Ok();
}

Status UdpTransport::open_paths(const std::vector<std::vector<std::byte>>& addresses) {
  std::vector<Address> all;
  OR_RETURN_IF_ERROR(read_addresses(addresses, all));
  OR_RETURN_IF_ERROR(open_path(all));
  OR_LOG(info, "udp: rank %d of %d over %s (%s:%u), window %zu bytes per peer, %s", rank_, ranks_, describe().c_str(),
         ip_text(endpoint_.ip).c_str(), static_cast<unsigned>(endpoint_.port),
         windows_[static_cast<std::size_t>((rank_ + 1) % ranks_)].window_bytes(),
         authenticator_ ? "authenticated" : "not authenticated");
  return Status::Ok();
}

// Keeps this rank's socket on the chosen path and builds everything that depends on the path.
Status UdpTransport::open_path(const std::vector<Address>& all) {
  Path path;
  OR_RETURN_IF_ERROR(choose_path(all, settings_.iface, path));
  auto& mine = candidates_.at(path.endpoint[static_cast<std::size_t>(rank_)]);
  endpoint_ = mine.endpoint;
  socket_ = std::move(mine.socket);
  candidates_.clear();  // closes the sockets of the other interfaces
  datagram_bytes_ = path.datagram_bytes;
  OR_CHECK(datagram_bytes_ > datagram::Header::kSize + ParityGroups(settings_.fec_group, 1).parity_room() + datagram::Header::kMaxEngineHeader, unavailable,
           "udp: datagrams of " + std::to_string(datagram_bytes_) + " bytes are too small");
  // Rank 0's secret keys the job.
  OR_RETURN_IF_ERROR(key_job(settings_.authenticate, all[0].secret));
  std::vector<sockaddr_in> peers;
  windows_.clear();
  for (std::size_t r = 0; r < all.size(); ++r) {
    const Endpoint& e = all[r].endpoints[path.endpoint[r]];
    peers.push_back(socket_address(e));
    windows_.emplace_back(datagram::receive_window_bytes(e.receive_buffer, datagram_bytes_, ranks_));
  }
  dispatch_ = std::make_unique<datagram::ReceiveDispatch>(rank_, ranks_, authenticator_.get(), settings_.fec_group, datagram_bytes_);
  parity_ = ParityGroups(settings_.fec_group, ranks_);
  receive_ = std::make_unique<ReceivePath>(*dispatch_, peers, counters_);
  // Segmentation pays where at least two datagrams fit one send; on loopback one already fills it.
  const bool gso = 2 * datagram_bytes_ <= kMaxUdpPayload;
  sender_ = std::make_unique<Sender>(socket_.fd(), std::move(peers), gso, sealer_, windows_, bucket_, counters_);
  inbound_ = std::make_unique<datagram::InboundHandler>(handshake_, windows_, static_cast<datagram::ControlReplies&>(*this));
  return Status::Ok();
}

void UdpTransport::greet(const std::vector<int>& peers) {
  std::vector<Outgoing> hellos;
  for (int peer : peers) {
    const std::byte body[datagram::kHelloBytes] = {std::byte{handshake_.flags_for(peer)}};
    hellos.push_back(Outgoing::copied(peer, sealer_.seal(peer, datagram::Kind::hello, {}, body), {}, body));
  }
  sender_->send_control(std::move(hellos));
}

}  // namespace optireduce::udp
