#include "udp_transport.hpp"

#include <poll.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "local_interfaces.hpp"
#include "optireduce/log.hpp"
#include "optireduce/poll_until.hpp"
#include "path.hpp"
#include "segmentation.hpp"

namespace optireduce::udp {
namespace {

// Pacing: how far above the rate calibration measured the bucket refills (that rate includes
// the ranks' skew).
constexpr double kPaceHeadroom = 2.0;
// The bucket holds what the rate sends in this long (at least two full GSO sends): a burst a
// switch's buffer absorbs, and few enough wake-ups that a rank sharing its core with others is
// not descheduled between every two datagrams (a bucket of two datagrams woke the sender after
// every two, each time for one sendmmsg of two datagrams).
constexpr double kBurstSeconds = 1e-3;
constexpr double kMinBurstBytes = 2.0 * kMaxUdpPayload;

double burst_bytes(double bytes_per_s) { return std::max(kMinBurstBytes, kBurstSeconds * bytes_per_s); }
constexpr int kReadBatches = 4;  // recvmmsg calls per progress step
// Sends wait for poll() so they leave in batches, unless this much is queued to one peer.
constexpr std::size_t kEagerFlushBytes = 8 * kMaxUdpPayload;
constexpr auto kLongestWait = std::chrono::seconds(1);

}  // namespace

UdpTransport::UdpTransport(const UdpSettings& settings)
    : DatagramTransport("udp", datagram::TokenBucket(settings.rate_bits_per_s / 8, burst_bytes(settings.rate_bits_per_s / 8)),
                        settings.rate_bits_per_s > 0),
      settings_(settings) {}

// One socket per usable interface (or only the named one), each bound before connect() so its
// port can travel in the address; connect() keeps the one the path needs.
Status UdpTransport::start() {
  std::vector<LocalInterface> interfaces;
  OR_CHECK(settings_.fec_group <= datagram::kMaxFecGroup, invalid,
           "udp: FEC groups of " + std::to_string(settings_.fec_group) + " datagrams");
  OR_RETURN_IF_ERROR(ipv4_interfaces(interfaces));
  for (const LocalInterface& li : interfaces) {
    if (candidates_.size() == Address::kMaxEndpoints) break;
    if (!settings_.iface.empty() && li.name != settings_.iface) continue;
    Candidate c;
    const Status bound = UdpSocket::bind(li.ip, settings_.port_first, settings_.port_last, c.socket);
    if (!bound.ok()) {
      OR_LOG(debug, "%s", bound.text().c_str());
      continue;
    }
    OR_RETURN_IF_ERROR(c.socket.forbid_fragmentation());
    c.socket.size_send_buffer(kWantedSendBufferBytes);
    if (!c.socket.enable_gro())  // each datagram then comes in a buffer of its own
      OR_LOG(debug, "udp: %s: the kernel refuses UDP_GRO: %s", li.name.c_str(), std::strerror(errno));
    const auto granted = c.socket.size_receive_buffer(kWantedReceiveBufferBytes);
    c.endpoint = {li, c.socket.port(), static_cast<std::uint32_t>(granted)};
    candidates_.push_back(std::move(c));
  }
  OR_CHECK(!candidates_.empty(), unavailable,
           settings_.iface.empty() ? std::string("udp: no IPv4 interface to bind a socket to")
                                   : "OPTIREDUCE_UDP_IFACE=\"" + settings_.iface + "\": no IPv4 address to bind a socket to");
  OR_RETURN_IF_ERROR(datagram::draw_secret(secret_));
  Address mine;
  mine.authenticate = settings_.authenticate;
  mine.fec_group = settings_.fec_group;
  mine.secret = secret_;
  mine.host = datagram::this_host();
  for (const auto& c : candidates_) mine.endpoints.push_back(c.endpoint);
  address_ = encode(mine);
  return Status::Ok();
}

// The copies leave together, in one batch.
void UdpTransport::send_control(int peer, std::span<const std::byte> header, std::span<const std::byte> payload,
                                int copies) {
  std::vector<Outgoing> batch;
  for (int copy = 0; copy < copies; ++copy)
    batch.push_back(Outgoing::copied(peer, sealer_.seal(peer, datagram::Kind::data, header, payload), header, payload));
  sender_->send_control(std::move(batch));
}

void UdpTransport::queue_data(int peer, std::span<const std::byte> header, std::span<const std::byte> payload) {
  const std::uint64_t sequence = sealer_.next_sequence(peer);
  Outgoing datagram = Outgoing::referencing(peer, sealer_.seal(peer, datagram::Kind::data, header, payload), header, payload);
  const bool full = parity_.enabled() && parity_.add(sequence, datagram, Clock::now());
  sender_->queue_data(std::move(datagram));
  if (full) close_parity_group(peer);
  if (sender_->queued_bytes(peer) >= kEagerFlushBytes) sender_->flush();
}

std::size_t UdpTransport::sends_referencing(int peer) const { return sender_->queued(peer); }

bool UdpTransport::drop_queued_data() {
  sender_->abandon_data();
  parity_.drop_open();  // a parity must cover only datagrams that left
  return true;  // sendmsg copied whatever left: nothing references a buffer any more
}

// The parity of `peer`'s group, queued behind its members (it counts in the window like data).
void UdpTransport::close_parity_group(int peer) {
  std::vector<std::byte> table, parity;
  parity_.close(peer, table, parity);
  sender_->queue_data(Outgoing::copied(peer, sealer_.seal(peer, datagram::Kind::parity, table, parity), table, parity));
  ++counters_.fec_parity_sent;
}

void UdpTransport::reply(int peer, datagram::Kind kind, std::span<const std::byte> body) {
  std::vector<Outgoing> one;
  one.push_back(Outgoing::copied(peer, sealer_.seal(peer, kind, {}, body), {}, body));
  sender_->send_control(std::move(one));
}

void UdpTransport::progress(bool readable) {
  if (parity_.enabled())
    for (int peer : parity_.lingering(Clock::now())) close_parity_group(peer);
  sender_->flush();
  if (!readable) return;
  receive_->read(socket_.fd(), *inbound_, kReadBatches);
  sender_->flush();  // pongs that came in may have opened windows
}

// Blocks on the socket until a datagram arrives, the sender can move again, or `until`; true
// unless the socket is known to have nothing to read.
bool UdpTransport::wait(Clock::time_point until) {
  const auto now = Clock::now();
  until = std::min({until, sender_->next_attempt(now), parity_.next_close(), now + kLongestWait});
  if (until <= now) return true;
  pollfd pfd{socket_.fd(), static_cast<short>(POLLIN | (sender_->waiting_for_room() ? POLLOUT : 0)), 0};
  const int n = poll_until(pfd, until);
  return n != 0 && (n < 0 || (pfd.revents & (POLLIN | POLLERR)) != 0);
}

std::size_t UdpTransport::max_message_bytes() const {
  const std::size_t overhead = datagram::Header::kSize + parity_.parity_room();
  return datagram_bytes_ > overhead ? datagram_bytes_ - overhead : 0;
}

std::string UdpTransport::describe() const {
  if (!connected_) return "udp (not connected)";
  std::string d = "udp " + endpoint_.name;
  const std::string fec = parity_.enabled() ? " fec " + std::to_string(settings_.fec_group) : "";
  if (sender_->gso()) {
    const std::size_t run = std::min(kMaxGsoSegments, kMaxUdpPayload / datagram_bytes_);
    return d + " gso " + std::to_string(datagram_bytes_) + "x" + std::to_string(run) + fec;
  }
  return d + " " + std::to_string(datagram_bytes_) + "B" + fec;
}

void UdpTransport::follow_pace(double bytes_per_s) {
  bucket_.configure(kPaceHeadroom * bytes_per_s, burst_bytes(kPaceHeadroom * bytes_per_s));
}

}  // namespace optireduce::udp
