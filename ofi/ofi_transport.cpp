#include "ofi_transport.hpp"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <rdma/fabric.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_errno.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/uio.h>

#include <algorithm>
#include <array>
#include <bit>
#include <cstring>
#include <deque>
#include <fstream>

#include "datagram.hpp"
#include "fec.hpp"
#include "log.hpp"
#include "token_bucket.hpp"

namespace optireduce {
namespace {

using ofi::DatagramHeader;
using ofi::DatagramKind;
using ofi::DatagramReject;
using ofi::SipKey;
using ofi::TokenBucket;

constexpr std::uint32_t kFiVersion = FI_VERSION(1, 9);
constexpr std::size_t kReceivesPosted = 512;  // udp offers 1024; half keeps headroom for reposts
constexpr std::size_t kMaxCompletionsPerPoll = 256;
constexpr auto kHelloInterval = std::chrono::milliseconds(2);
constexpr int kHelloLinger = 10;  // all ten lost to one peer: p^10 (1e-10 at 10 % loss)
// Pace before (and at least) what the calibration calls suggest: 2.4 Gbit/s per rank.
constexpr double kDefaultPaceBytesPerS = 300e6;
// Most that one rank puts in front of its receivers at once: a share of one receiver's default
// socket buffer (208 KiB), which every sender fills together.
constexpr double kBurstBytes = 48 * 1024;
constexpr std::size_t kIpUdpOverhead = 28;
constexpr auto kSendBufferBackoff = std::chrono::microseconds(50);
constexpr auto kPingRetry = std::chrono::milliseconds(1);
// Share of a receiver's socket buffer the senders may fill together, and when a sender asks for
// confirmation (share of its window unconfirmed).
constexpr double kWindowShare = 0.9;
constexpr double kPingAt = 0.4;

// Bytes one sender may have unconfirmed at one receiver: half of what the receiver's socket
// buffer holds in datagrams of this size, shared by every other rank. The udp provider keeps the
// kernel's default buffer (net.core.rmem_default): raising it raises this window.
std::size_t receive_window(std::size_t datagram_bytes, int ranks) {
  std::size_t rcvbuf = 212992;
  std::ifstream("/proc/sys/net/core/rmem_default") >> rcvbuf;
  // The kernel charges a datagram its buffer's true size: the data rounded up to a power of
  // two with room for the packet headers, plus the socket buffer's bookkeeping.
  const std::size_t charged = std::bit_ceil(datagram_bytes + 384) + 256;
  const double usable = double(rcvbuf) * double(datagram_bytes) / double(charged);
  return std::max<std::size_t>(datagram_bytes + kIpUdpOverhead, static_cast<std::size_t>(kWindowShare * usable / std::max(1, ranks - 1)));
}

// Whether two processes can reach each other over loopback: the same kernel (boot id) and the
// same network namespace. Host names are not enough: namespaces on one machine share them.
std::string loopback_identity() {
  std::string boot;
  std::ifstream("/proc/sys/kernel/random/boot_id") >> boot;
  struct stat st {};
  const bool has_ns = ::stat("/proc/self/ns/net", &st) == 0;
  return boot + "/" + (has_ns ? std::to_string(st.st_ino) : std::string("?"));
}

bool is_loopback(const fi_info* info) {
  if (info->domain_attr && info->domain_attr->name && std::strcmp(info->domain_attr->name, "lo") == 0) return true;
  if (!info->src_addr) return false;
  const auto* sa = static_cast<const sockaddr*>(info->src_addr);
  if (sa->sa_family == AF_INET)
    return (ntohl(static_cast<const sockaddr_in*>(info->src_addr)->sin_addr.s_addr) >> 24) == 127;
  if (sa->sa_family == AF_INET6)
    return IN6_IS_ADDR_LOOPBACK(&static_cast<const sockaddr_in6*>(info->src_addr)->sin6_addr);
  return false;
}

std::string fi_error(const char* what, int rc) { return std::string(what) + ": " + fi_strerror(-rc); }

struct FiInfoList {
  fi_info* head = nullptr;
  ~FiInfoList() {
    if (head) fi_freeinfo(head);
  }
};

// One opened datagram endpoint with its own fabric, domain, address vector and queues.
struct Endpoint {
  fi_info* info = nullptr;
  fid_fabric* fabric = nullptr;
  fid_domain* domain = nullptr;
  fid_av* av = nullptr;
  fid_cq* tx_cq = nullptr;
  fid_cq* rx_cq = nullptr;
  fid_ep* ep = nullptr;
  int wait_fd = -1;
  bool loopback = false;
  std::vector<std::byte> name;

  ~Endpoint() {
    if (ep) fi_close(&ep->fid);
    if (rx_cq) fi_close(&rx_cq->fid);
    if (tx_cq) fi_close(&tx_cq->fid);
    if (av) fi_close(&av->fid);
    if (domain) fi_close(&domain->fid);
    if (fabric) fi_close(&fabric->fid);
    if (info) fi_freeinfo(info);
  }

  bool open(const fi_info* chosen, std::string& error) {
    info = fi_dupinfo(chosen);
    loopback = is_loopback(info);
    int rc = fi_fabric(info->fabric_attr, &fabric, nullptr);
    if (rc) return error = fi_error("fi_fabric", rc), false;
    if ((rc = fi_domain(fabric, info, &domain, nullptr))) return error = fi_error("fi_domain", rc), false;
    fi_av_attr av_attr{};
    av_attr.type = FI_AV_TABLE;
    if ((rc = fi_av_open(domain, &av_attr, &av, nullptr))) return error = fi_error("fi_av_open", rc), false;
    fi_cq_attr cq_attr{};
    cq_attr.format = FI_CQ_FORMAT_MSG;
    cq_attr.size = info->tx_attr->size;
    cq_attr.wait_obj = FI_WAIT_NONE;
    if ((rc = fi_cq_open(domain, &cq_attr, &tx_cq, nullptr))) return error = fi_error("fi_cq_open (send)", rc), false;
    cq_attr.size = info->rx_attr->size;
    cq_attr.wait_obj = FI_WAIT_FD;
    if ((rc = fi_cq_open(domain, &cq_attr, &rx_cq, nullptr))) return error = fi_error("fi_cq_open (receive)", rc), false;
    if ((rc = fi_control(&rx_cq->fid, FI_GETWAIT, &wait_fd))) return error = fi_error("fi_control(FI_GETWAIT)", rc), false;
    if ((rc = fi_endpoint(domain, info, &ep, nullptr))) return error = fi_error("fi_endpoint", rc), false;
    if ((rc = fi_ep_bind(ep, &av->fid, 0))) return error = fi_error("fi_ep_bind(av)", rc), false;
    if ((rc = fi_ep_bind(ep, &tx_cq->fid, FI_TRANSMIT))) return error = fi_error("fi_ep_bind(send cq)", rc), false;
    if ((rc = fi_ep_bind(ep, &rx_cq->fid, FI_RECV))) return error = fi_error("fi_ep_bind(receive cq)", rc), false;
    if ((rc = fi_enable(ep))) return error = fi_error("fi_enable", rc), false;
    std::size_t length = 256;
    name.resize(length);
    if ((rc = fi_getname(&ep->fid, name.data(), &length))) return error = fi_error("fi_getname", rc), false;
    name.resize(length);
    return true;
  }

  std::string describe() const {
    return std::string(info->fabric_attr->prov_name) + "/" + (info->domain_attr->name ? info->domain_attr->name : "?");
  }
};

// Picks the endpoints to open: the named interface, or a loopback one and an outward one (the
// choice between them is made in connect(), once every rank's loopback identity is known).
std::vector<const fi_info*> candidates(const fi_info* list, const OfiOptions& options, std::string& error) {
  std::string provider = options.provider;
  if (provider.empty() && list) provider = list->fabric_attr->prov_name;
  std::vector<const fi_info*> mine;
  std::string offered;
  for (const fi_info* i = list; i; i = i->next) {
    if (provider != i->fabric_attr->prov_name) continue;
    // IPv4 first where the provider offers both: one address per interface is enough.
    if (i->addr_format == FI_SOCKADDR_IN6) {
      bool has_v4 = false;
      for (const fi_info* j = list; j; j = j->next)
        if (j->addr_format == FI_SOCKADDR_IN && !std::strcmp(j->fabric_attr->prov_name, i->fabric_attr->prov_name) &&
            !std::strcmp(j->domain_attr->name, i->domain_attr->name))
          has_v4 = true;
      if (has_v4) continue;
    }
    const std::string domain = i->domain_attr->name ? i->domain_attr->name : "";
    if (offered.find(domain + ",") == std::string::npos && ("," + offered).find("," + domain + ",") == std::string::npos)
      offered += domain + ",";
    mine.push_back(i);
  }
  if (mine.empty()) {
    error = options.provider.empty() ? "libfabric offers no datagram (FI_EP_DGRAM) endpoint"
                                     : "OPTIREDUCE_OFI_PROVIDER=\"" + options.provider +
                                           "\" offers no datagram endpoint here (fi_info -t FI_EP_DGRAM lists those that do)";
    return {};
  }
  if (!offered.empty()) offered.pop_back();
  if (!options.iface.empty()) {
    for (const fi_info* i : mine)
      if (options.iface == i->domain_attr->name) return {i};
    error = "OPTIREDUCE_OFI_IFACE=\"" + options.iface + "\": provider " + provider + " has no datagram endpoint on it; it offers: " + offered;
    return {};
  }
  const fi_info* loop = nullptr;
  const fi_info* outward = nullptr;
  for (const fi_info* i : mine) {
    if (is_loopback(i)) {
      if (!loop) loop = i;
    } else if (!outward) {
      outward = i;
    }
  }
  std::vector<const fi_info*> out;
  if (loop) out.push_back(loop);
  if (outward) out.push_back(outward);
  return out;
}

class OfiTransport final : public Transport {
 public:
  explicit OfiTransport(const OfiOptions& options)
      : options_(options),
        bucket_(options.rate_bits_per_s > 0 ? options.rate_bits_per_s / 8 : kDefaultPaceBytesPerS, kBurstBytes),
        fec_group_(options.fec_group) {}
  ~OfiTransport() override = default;

  bool start(std::string& error);
  std::vector<std::byte> local_address() const override { return address_; }
  TransportStatus connect(int self_rank, const std::vector<std::vector<std::byte>>& peers,
                          Clock::time_point deadline) override;
  TransportStatus send(int peer, std::span<const std::byte> header, std::span<const std::byte> payload) override;
  std::size_t sends_in_flight(int peer) const override { return in_flight_.at(peer); }
  bool abandon_queued_sends() override;
  TransportStatus poll(Clock::time_point deadline, const std::function<void(const InboundMessage&)>& on_message) override;
  std::size_t max_message_bytes() const override { return max_body_; }
  bool reliable() const override { return false; }
  std::string describe() const override { return description_; }
  void suggest_pace(double bytes_per_s) override;
  std::vector<std::pair<std::string, std::uint64_t>> counters() const override;

 private:
  struct TxEntry {
    fi_context2 context;  // first: providers that need FI_CONTEXT use the memory we pass
    int peer = -1;
    bool engine_send = false;  // counts in sends_in_flight()
    std::vector<std::byte> head;  // provider prefix + datagram header + engine header (+ payload if copied)
    std::span<const std::byte> payload;
  };
  struct RxBuffer {
    fi_context2 context;
    std::vector<std::byte> data;
  };

  TxEntry* new_entry();
  void queue_datagram(int peer, DatagramKind kind, std::span<const std::byte> header, std::span<const std::byte> payload);
  void close_parity_group(int peer);
  void queue_value(int peer, ofi::DatagramKind kind, std::uint64_t value);
  std::size_t wire_bytes(const TxEntry* e) const;
  bool window_open(int peer, std::size_t bytes) const;
  void maybe_ping(int peer, Clock::time_point now);
  bool post(TxEntry* e);
  void release(TxEntry* e);
  void flush_sends();
  void reap_sends();
  bool post_receive(RxBuffer& buffer);
  // Reads up to kMaxCompletionsPerPoll received datagrams; returns how many reached the engine.
  std::size_t drain_receives(const std::function<void(const InboundMessage&)>* on_message);
  void deliver(std::span<const std::byte> datagram, fi_addr_t from, const std::function<void(const InboundMessage&)>* on_message);
  void deliver_body(int source, std::span<const std::byte> body, std::size_t header_bytes,
                    const std::function<void(const InboundMessage&)>* on_message);
  void wait(Clock::time_point until);

  OfiOptions options_;
  std::vector<std::unique_ptr<Endpoint>> candidates_;
  Endpoint* endpoint_ = nullptr;
  std::vector<std::byte> address_;
  SipKey key_{};
  std::string identity_;
  std::string description_;
  std::size_t prefix_ = 0;       // FI_MSG_PREFIX bytes the provider wants in front of each buffer
  std::size_t max_datagram_ = 0; // provider's max_msg_size
  std::size_t max_body_ = 0;     // engine header + payload per datagram
  bool copy_payload_ = false;    // provider takes a single buffer per send
  bool has_source_ = false;      // provider reports the sender's address (FI_SOURCE)

  int rank_ = -1;
  int ranks_ = 0;
  std::vector<fi_addr_t> addresses_;
  std::vector<std::size_t> in_flight_;
  std::vector<std::uint32_t> next_sequence_;
  std::vector<std::deque<TxEntry*>> queues_;  // per peer: data and parity, in order
  std::deque<TxEntry*> control_;              // hello, ping, pong: first, outside the window
  int next_peer_ = 0;                         // round robin over the peers' queues
  // Flow control without retransmission: at most window_bytes_ to a peer that it has not yet
  // confirmed reading (a pong answers a ping once everything before the ping was read), so a
  // peer that is not reading (still in an earlier call, descheduled) cannot have its socket
  // buffer overrun. Sized from the receive buffer the kernel gives a socket.
  std::size_t window_bytes_ = 0;
  std::vector<std::uint64_t> sent_bytes_, confirmed_bytes_, ping_value_;
  std::vector<Clock::time_point> ping_at_;
  std::vector<std::unique_ptr<TxEntry>> entries_;
  std::vector<TxEntry*> free_entries_;
  std::vector<std::unique_ptr<RxBuffer>> receives_;
  TokenBucket bucket_;
  std::vector<std::uint8_t> heard_;  // hello seen from each rank (connect)
  Clock::time_point send_blocked_until_{};

  unsigned fec_group_ = 0;
  std::vector<ofi::ParityEncoder> encoders_;  // per destination
  std::vector<ofi::ParityDecoder> decoders_;  // per source

  std::array<std::uint64_t, ofi::kDatagramRejectReasons> rejected_{};
  std::uint64_t unknown_sender_ = 0;
  std::uint64_t send_errors_ = 0;
  std::uint64_t abandoned_ = 0;  // queued datagrams dropped before they were sent
  std::uint64_t datagrams_sent_ = 0, datagrams_received_ = 0;
  std::uint64_t parity_sent_ = 0;
};

bool OfiTransport::start(std::string& error) {
  fi_info* hints = fi_allocinfo();
  hints->ep_attr->type = FI_EP_DGRAM;
  hints->caps = FI_MSG | FI_SOURCE;
  hints->mode = FI_CONTEXT | FI_CONTEXT2 | FI_MSG_PREFIX;
  hints->domain_attr->threading = FI_THREAD_DOMAIN;
  if (!options_.provider.empty()) hints->fabric_attr->prov_name = strdup(options_.provider.c_str());
  FiInfoList list;
  int rc = fi_getinfo(kFiVersion, nullptr, nullptr, 0, hints, &list.head);
  if (rc == -FI_ENODATA) {  // a provider without FI_SOURCE: the datagram header still names the sender
    hints->caps = FI_MSG;
    rc = fi_getinfo(kFiVersion, nullptr, nullptr, 0, hints, &list.head);
  }
  fi_freeinfo(hints);
  if (rc) {
    error = rc == -FI_ENODATA ? (options_.provider.empty() ? "libfabric offers no datagram (FI_EP_DGRAM) endpoint"
                                                          : "OPTIREDUCE_OFI_PROVIDER=\"" + options_.provider +
                                                                "\" offers no datagram endpoint here (fi_info -t FI_EP_DGRAM lists those that do)")
                              : fi_error("fi_getinfo", rc);
    return false;
  }
  auto picked = candidates(list.head, options_, error);
  if (picked.empty()) return false;
  for (const fi_info* info : picked) {
    auto e = std::make_unique<Endpoint>();
    std::string why;
    if (!e->open(info, why)) {
      OR_LOG(debug, "ofi: cannot open %s/%s: %s", info->fabric_attr->prov_name, info->domain_attr->name, why.c_str());
      if (picked.size() == 1) return error = why, false;
      continue;
    }
    candidates_.push_back(std::move(e));
  }
  if (candidates_.empty()) return error = "ofi: no datagram endpoint could be opened", false;

  // Address: [version][16-byte key][identity][endpoints: loopback flag, name].
  if (getrandom(key_.data(), sizeof key_, 0) != static_cast<ssize_t>(sizeof key_))
    return error = "ofi: no randomness for the job secret", false;
  identity_ = loopback_identity();
  auto put = [&](const void* p, std::size_t n) {
    const auto* b = static_cast<const std::byte*>(p);
    address_.insert(address_.end(), b, b + n);
  };
  const std::uint8_t version = 1, identity_bytes = static_cast<std::uint8_t>(std::min<std::size_t>(identity_.size(), 255));
  put(&version, 1);
  put(key_.data(), sizeof key_);
  put(&identity_bytes, 1);
  put(identity_.data(), identity_bytes);
  const auto count = static_cast<std::uint8_t>(candidates_.size());
  put(&count, 1);
  for (const auto& e : candidates_) {
    const std::uint8_t loop = e->loopback ? 1 : 0, length = static_cast<std::uint8_t>(e->name.size());
    put(&loop, 1);
    put(&length, 1);
    put(e->name.data(), e->name.size());
  }
  return true;
}

TransportStatus OfiTransport::connect(int self_rank, const std::vector<std::vector<std::byte>>& peers,
                                      Clock::time_point deadline) {
  rank_ = self_rank;
  ranks_ = static_cast<int>(peers.size());
  if (ranks_ > 65535) {
    OR_LOG(error, "ofi: %d ranks; the datagram header holds at most 65535", ranks_);
    return TransportStatus::error;
  }
  // Parse every rank's address. Every rank sees the same blobs, so every rank chooses alike.
  struct Peer {
    SipKey key{};
    std::string identity;
    std::vector<std::byte> loop, outward;
  };
  std::vector<Peer> parsed(peers.size());
  for (int r = 0; r < ranks_; ++r) {
    const auto& blob = r == rank_ ? address_ : peers[r];
    std::size_t at = 0;
    auto take = [&](void* dst, std::size_t n) {
      if (at + n > blob.size()) return false;
      std::memcpy(dst, blob.data() + at, n);
      at += n;
      return true;
    };
    std::uint8_t version = 0, id_bytes = 0, count = 0;
    bool ok = take(&version, 1) && version == 1 && take(parsed[r].key.data(), sizeof(SipKey)) && take(&id_bytes, 1);
    parsed[r].identity.resize(id_bytes);
    ok = ok && take(parsed[r].identity.data(), id_bytes) && take(&count, 1);
    for (unsigned i = 0; ok && i < count; ++i) {
      std::uint8_t loop = 0, length = 0;
      std::vector<std::byte> name;
      ok = take(&loop, 1) && take(&length, 1);
      name.resize(length);
      ok = ok && take(name.data(), length);
      (loop ? parsed[r].loop : parsed[r].outward) = std::move(name);
    }
    if (!ok) {
      OR_LOG(error, "ofi: the address of rank %d is malformed", r);
      return TransportStatus::error;
    }
  }
  bool all_local = true, all_loop = true, all_outward = true;
  for (const auto& p : parsed) {
    all_local = all_local && p.identity == identity_;
    all_loop = all_loop && !p.loop.empty();
    all_outward = all_outward && !p.outward.empty();
  }
  const bool use_loop = all_loop && (all_local || !all_outward);
  if (!use_loop && !all_outward) {
    OR_LOG(error, "ofi: the ranks have no datagram interface in common (some ranks have only loopback); set OPTIREDUCE_OFI_IFACE");
    return TransportStatus::error;
  }
  for (auto& e : candidates_)
    if (e->loopback == use_loop || candidates_.size() == 1) endpoint_ = e.get();
  if (!endpoint_) return TransportStatus::error;
  std::erase_if(candidates_, [&](const auto& e) { return e.get() != endpoint_; });
  if (use_loop && !all_local)
    OR_LOG(warn, "ofi: ranks are in different network namespaces or hosts but only loopback is available; datagrams may not arrive");

  key_ = parsed[0].key;  // rank 0's secret keys every tag of this communicator
  const fi_info* info = endpoint_->info;
  prefix_ = (info->mode & FI_MSG_PREFIX) ? info->ep_attr->msg_prefix_size : 0;
  max_datagram_ = std::min<std::size_t>(info->ep_attr->max_msg_size, 65507);
  if (max_datagram_ < DatagramHeader::kSize + 64 + 256) {
    OR_LOG(error, "ofi: %s carries at most %zu bytes per datagram, too few", endpoint_->describe().c_str(), max_datagram_);
    return TransportStatus::error;
  }
  max_body_ = max_datagram_ - DatagramHeader::kSize;
  if (fec_group_) max_body_ -= ofi::ParityEncoder::table_bytes(fec_group_);  // room for a parity's member table
  copy_payload_ = info->tx_attr->iov_limit < 2;
  has_source_ = (info->caps & FI_SOURCE) != 0;
  description_ = endpoint_->describe();

  addresses_.assign(ranks_, FI_ADDR_NOTAVAIL);
  for (int r = 0; r < ranks_; ++r) {
    const auto& name = use_loop ? parsed[r].loop : parsed[r].outward;
    if (fi_av_insert(endpoint_->av, name.data(), 1, &addresses_[r], 0, nullptr) != 1) {
      OR_LOG(error, "ofi: cannot insert the address of rank %d", r);
      return TransportStatus::error;
    }
  }
  in_flight_.assign(ranks_, 0);
  next_sequence_.assign(ranks_, 0);
  queues_.assign(ranks_, {});
  sent_bytes_.assign(ranks_, 0);
  confirmed_bytes_.assign(ranks_, 0);
  ping_value_.assign(ranks_, 0);
  ping_at_.assign(ranks_, Clock::time_point{});
  window_bytes_ = receive_window(max_datagram_, ranks_);
  encoders_.assign(ranks_, ofi::ParityEncoder(fec_group_, max_body_));
  decoders_.assign(ranks_, ofi::ParityDecoder(fec_group_, max_body_));
  const std::size_t posted = std::min<std::size_t>(kReceivesPosted, info->rx_attr->size);
  for (std::size_t i = 0; i < posted; ++i) {
    auto b = std::make_unique<RxBuffer>();
    b->data.resize(prefix_ + max_datagram_);
    if (!post_receive(*b)) return TransportStatus::error;
    receives_.push_back(std::move(b));
  }

  // Both directions work once a hello came from every peer; each rank keeps saying hello until
  // it heard everyone, then kHelloLinger more times, so a peer that lost ours (on a lossy
  // network) hears one of them: this rank stops reading hellos after that. A datagram to a rank
  // not yet polling waits in its socket buffer.
  heard_.assign(ranks_, 0);
  heard_[rank_] = 1;
  auto say_hello = [&] {
    for (int r = 0; r < ranks_; ++r)
      if (r != rank_) queue_datagram(r, DatagramKind::hello, {}, {});
    flush_sends();
  };
  auto everyone = [&] { return std::all_of(heard_.begin(), heard_.end(), [](auto h) { return h != 0; }); };
  auto next_hello = Clock::now();
  while (!everyone()) {
    const auto now = Clock::now();
    if (now >= deadline) {
      for (int r = 0; r < ranks_; ++r)
        if (!heard_[r]) OR_LOG(error, "ofi: no hello from rank %d over %s", r, description_.c_str());
      return TransportStatus::timeout;
    }
    if (now >= next_hello) {
      say_hello();
      next_hello = now + kHelloInterval;
    }
    reap_sends();
    drain_receives(nullptr);
    if (!everyone()) wait(std::min(next_hello, deadline));
  }
  for (int round = 0; round < kHelloLinger; ++round) {
    say_hello();
    const auto until = Clock::now() + kHelloInterval;
    while (Clock::now() < until) {
      reap_sends();
      wait(until);
      drain_receives(nullptr);
    }
  }
  return TransportStatus::ok;
}

OfiTransport::TxEntry* OfiTransport::new_entry() {
  if (free_entries_.empty()) {
    entries_.push_back(std::make_unique<TxEntry>());
    return entries_.back().get();
  }
  TxEntry* e = free_entries_.back();
  free_entries_.pop_back();
  return e;
}

void OfiTransport::queue_datagram(int peer, DatagramKind kind, std::span<const std::byte> header,
                                  std::span<const std::byte> payload) {
  TxEntry* e = new_entry();
  e->peer = peer;
  e->engine_send = kind == DatagramKind::data;
  DatagramHeader h;
  h.kind = kind;
  h.source = static_cast<std::uint16_t>(rank_);
  h.header_bytes = static_cast<std::uint16_t>(header.size());
  h.sequence = next_sequence_[peer]++;
  const bool copy = copy_payload_ || kind != DatagramKind::data;
  e->head.resize(prefix_ + DatagramHeader::kSize + header.size() + (copy ? payload.size() : 0));
  if (!header.empty()) std::memcpy(e->head.data() + prefix_ + DatagramHeader::kSize, header.data(), header.size());
  if (copy && !payload.empty()) std::memcpy(e->head.data() + prefix_ + DatagramHeader::kSize + header.size(), payload.data(), payload.size());
  e->payload = copy ? std::span<const std::byte>{} : payload;
  encode_datagram_header(h, key_, header,
                         std::span<std::byte, DatagramHeader::kSize>(e->head.data() + prefix_, DatagramHeader::kSize));
  if (kind == DatagramKind::data || kind == DatagramKind::parity) {
    queues_[peer].push_back(e);
  } else {
    control_.push_back(e);
  }
  if (e->engine_send) ++in_flight_[peer];

  // Forward error correction: data datagrams feed the destination's parity group; a full group
  // sends its parity right behind it.
  if (kind == DatagramKind::data && fec_group_) {
    auto& enc = encoders_[peer];
    enc.add(h.sequence, header, payload);
    if (enc.full()) close_parity_group(peer);
  }
}

void OfiTransport::close_parity_group(int peer) {
  std::vector<std::byte> table, parity;
  encoders_[peer].finish(table, parity);
  ++parity_sent_;
  queue_datagram(peer, DatagramKind::parity, table, parity);
}

void OfiTransport::queue_value(int peer, DatagramKind kind, std::uint64_t value) {
  std::array<std::byte, 8> body;
  for (int i = 0; i < 8; ++i) body[i] = std::byte((value >> (8 * i)) & 0xff);
  queue_datagram(peer, kind, body, {});
}

TransportStatus OfiTransport::send(int peer, std::span<const std::byte> header, std::span<const std::byte> payload) {
  if (peer < 0 || peer >= ranks_ || peer == rank_ || header.size() > DatagramHeader::kMaxTaggedHeader ||
      header.size() + payload.size() > max_body_)
    return TransportStatus::error;
  queue_datagram(peer, DatagramKind::data, header, payload);
  flush_sends();
  return TransportStatus::ok;
}

std::size_t OfiTransport::wire_bytes(const TxEntry* e) const {
  return e->head.size() - prefix_ + e->payload.size() + kIpUdpOverhead;
}

bool OfiTransport::window_open(int peer, std::size_t bytes) const {
  const std::uint64_t unconfirmed = sent_bytes_[peer] - confirmed_bytes_[peer];
  return unconfirmed == 0 || unconfirmed + bytes <= window_bytes_;
}

void OfiTransport::maybe_ping(int peer, Clock::time_point now) {
  // Ask for a confirmation every kPingAt of the window sent, so it is back before the window
  // closes, one at a time; ask again if it did not come (a lost ping or pong only delays, never
  // blocks). Asking more often would cost a datagram each way per round trip.
  const std::uint64_t unconfirmed = sent_bytes_[peer] - confirmed_bytes_[peer];
  const bool outstanding = ping_value_[peer] > confirmed_bytes_[peer];
  if (outstanding) {
    if (now - ping_at_[peer] < kPingRetry) return;
  } else if (double(unconfirmed) < kPingAt * double(window_bytes_) ||
             double(sent_bytes_[peer] - ping_value_[peer]) < kPingAt * double(window_bytes_)) {
    return;
  }
  ping_value_[peer] = sent_bytes_[peer];
  ping_at_[peer] = now;
  queue_value(peer, DatagramKind::ping, sent_bytes_[peer]);
}

// Hands one datagram to the provider: true when it is gone (sent, or failed for good and
// counted: never retried), false when the provider has no room now.
bool OfiTransport::post(TxEntry* e) {
  iovec iov[2] = {{e->head.data(), e->head.size()}, {const_cast<std::byte*>(e->payload.data()), e->payload.size()}};
  fi_msg msg{};
  msg.msg_iov = iov;
  msg.iov_count = e->payload.empty() ? 1 : 2;
  msg.addr = addresses_[e->peer];
  msg.context = &e->context;
  ssize_t rc = fi_sendmsg(endpoint_->ep, &msg, 0);
  if (rc == -FI_EAGAIN) {
    reap_sends();
    rc = fi_sendmsg(endpoint_->ep, &msg, 0);
  }
  if (rc == -FI_EAGAIN) {  // the socket's send buffer is full: try again shortly
    send_blocked_until_ = Clock::now() + kSendBufferBackoff;
    return false;
  }
  if (rc) {
    ++send_errors_;
    release(e);
    return true;
  }
  ++datagrams_sent_;
  return true;
}

void OfiTransport::release(TxEntry* e) {
  if (e->engine_send) --in_flight_[e->peer];
  free_entries_.push_back(e);
}

void OfiTransport::flush_sends() {
  reap_sends();
  auto now = Clock::now();
  if (now < send_blocked_until_) return;
  while (!control_.empty()) {
    if (!post(control_.front())) return;
    control_.pop_front();
  }
  // Data: round robin over the peers whose window is open, as fast as the bucket allows.
  for (;;) {
    int chosen = -1;
    for (int k = 0; k < ranks_ && chosen < 0; ++k) {
      const int p = (next_peer_ + k) % ranks_;
      if (queues_[p].empty()) continue;
      if (window_open(p, wire_bytes(queues_[p].front()))) chosen = p;
      else maybe_ping(p, now);
    }
    while (!control_.empty()) {  // pings just queued
      if (!post(control_.front())) return;
      control_.pop_front();
    }
    if (chosen < 0) return;
    TxEntry* e = queues_[chosen].front();
    const std::size_t bytes = wire_bytes(e);
    now = Clock::now();
    if (!bucket_.try_take(static_cast<double>(bytes), now)) return;
    if (!post(e)) return;
    queues_[chosen].pop_front();
    next_peer_ = (chosen + 1) % ranks_;
    sent_bytes_[chosen] += bytes;
    maybe_ping(chosen, now);
    // A parity group left open when the queue to its peer runs dry is closed now, so the tail
    // of a burst is protected too.
    if (fec_group_ && queues_[chosen].empty() && encoders_[chosen].open()) close_parity_group(chosen);
  }
}

bool OfiTransport::abandon_queued_sends() {
  reap_sends();
  for (auto& q : queues_) {
    for (TxEntry* e : q) {
      ++abandoned_;
      release(e);
    }
    q.clear();
  }
  return true;
}

void OfiTransport::reap_sends() {
  fi_cq_msg_entry done[64];
  for (;;) {
    const ssize_t n = fi_cq_read(endpoint_->tx_cq, done, 64);
    if (n == -FI_EAVAIL) {
      fi_cq_err_entry err{};
      if (fi_cq_readerr(endpoint_->tx_cq, &err, 0) == 1 && err.op_context) {
        ++send_errors_;
        release(reinterpret_cast<TxEntry*>(err.op_context));
      }
      continue;
    }
    if (n <= 0) return;
    for (ssize_t i = 0; i < n; ++i) release(reinterpret_cast<TxEntry*>(done[i].op_context));
  }
}

bool OfiTransport::post_receive(RxBuffer& buffer) {
  for (int attempt = 0; attempt < 2; ++attempt) {
    const ssize_t rc = fi_recv(endpoint_->ep, buffer.data.data(), buffer.data.size(), nullptr, FI_ADDR_UNSPEC, &buffer.context);
    if (rc == 0) return true;
    if (rc != -FI_EAGAIN) {
      OR_LOG(error, "ofi: fi_recv: %s", fi_strerror(static_cast<int>(-rc)));
      return false;
    }
  }
  return false;
}

std::size_t OfiTransport::drain_receives(const std::function<void(const InboundMessage&)>* on_message) {
  fi_cq_msg_entry done[16];
  fi_addr_t from[16];
  std::size_t delivered = 0, handled = 0;
  while (handled < kMaxCompletionsPerPoll) {
    ssize_t n = has_source_ ? fi_cq_readfrom(endpoint_->rx_cq, done, 16, from) : fi_cq_read(endpoint_->rx_cq, done, 16);
    if (n == -FI_EAVAIL) {
      fi_cq_err_entry err{};
      if (fi_cq_readerr(endpoint_->rx_cq, &err, 0) == 1 && err.op_context)
        post_receive(*reinterpret_cast<RxBuffer*>(err.op_context));
      ++rejected_[static_cast<std::size_t>(DatagramReject::short_datagram)];
      continue;
    }
    if (n <= 0) break;
    for (ssize_t i = 0; i < n; ++i) {
      auto* buffer = reinterpret_cast<RxBuffer*>(done[i].op_context);
      const std::size_t length = std::min(done[i].len, buffer->data.size() - prefix_);
      const std::uint64_t before = datagrams_received_;
      deliver({buffer->data.data() + prefix_, length}, has_source_ ? from[i] : FI_ADDR_NOTAVAIL, on_message);
      delivered += datagrams_received_ - before;
      post_receive(*buffer);
    }
    handled += static_cast<std::size_t>(n);
  }
  return delivered;
}

void OfiTransport::deliver(std::span<const std::byte> datagram, fi_addr_t from,
                           const std::function<void(const InboundMessage&)>* on_message) {
  DatagramHeader h;
  std::span<const std::byte> body;
  const DatagramReject r = parse_datagram(datagram, key_, ranks_, h, body);
  if (r != DatagramReject::none) {
    ++rejected_[static_cast<std::size_t>(r)];
    return;
  }
  // The address the provider saw must be the rank the (authenticated) header names.
  if (has_source_ && (from == FI_ADDR_NOTAVAIL || from != addresses_[h.source])) {
    ++unknown_sender_;
    return;
  }
  if (h.source == rank_) {
    ++rejected_[static_cast<std::size_t>(DatagramReject::bad_source)];
    return;
  }
  switch (h.kind) {
    case DatagramKind::hello:
      if (!heard_.empty()) heard_[h.source] = 1;
      return;
    case DatagramKind::ping:
    case DatagramKind::pong: {
      if (h.header_bytes != 8 || body.size() != 8) {
        ++rejected_[static_cast<std::size_t>(DatagramReject::bad_length)];
        return;
      }
      std::uint64_t value = 0;
      for (int i = 7; i >= 0; --i) value = (value << 8) | std::to_integer<std::uint64_t>(body[static_cast<std::size_t>(i)]);
      if (h.kind == DatagramKind::ping) {
        // Read in order after everything the peer sent before it: all of that is consumed.
        queue_value(h.source, DatagramKind::pong, value);
      } else if (value <= sent_bytes_[h.source]) {
        confirmed_bytes_[h.source] = std::max(confirmed_bytes_[h.source], value);
      }
      return;
    }
    case DatagramKind::data:
      if (fec_group_) decoders_[h.source].add(h.sequence, body);
      deliver_body(h.source, body, h.header_bytes, on_message);
      return;
    case DatagramKind::parity: {
      if (!fec_group_) return;
      std::vector<std::byte> repaired;
      std::size_t header_bytes = 0;
      if (decoders_[h.source].repair(h.sequence, body.first(h.header_bytes), body.subspan(h.header_bytes), repaired, header_bytes))
        deliver_body(h.source, repaired, header_bytes, on_message);
      return;
    }
  }
}

void OfiTransport::deliver_body(int source, std::span<const std::byte> body, std::size_t header_bytes,
                                const std::function<void(const InboundMessage&)>* on_message) {
  ++datagrams_received_;
  if (!on_message) return;  // during connect: nothing of the engine's can be in flight yet
  (*on_message)(ofi::inbound_message(source, body, header_bytes));
}

void OfiTransport::wait(Clock::time_point until) {
  const auto now = Clock::now();
  if (!control_.empty()) until = std::min(until, std::max(now, send_blocked_until_));
  for (int p = 0; p < ranks_; ++p) {
    if (queues_[p].empty()) continue;
    // The queue moves again when the bucket has the bytes and the socket room, or, for a peer
    // whose window is closed, when its confirmation comes (a datagram: wakes us) or is due again.
    const std::size_t bytes = wire_bytes(queues_[p].front());
    if (window_open(p, bytes))
      until = std::min(until, std::max(send_blocked_until_, bucket_.ready_at(static_cast<double>(bytes), now)));
    else
      until = std::min(until, ping_at_[p] + kPingRetry);
  }
  if (until <= now) return;
  fid* fids[1] = {&endpoint_->rx_cq->fid};
  if (fi_trywait(endpoint_->fabric, fids, 1) != FI_SUCCESS) return;  // something is ready already
  const auto left = std::chrono::duration_cast<std::chrono::nanoseconds>(until - now).count();
  timespec ts{static_cast<time_t>(left / 1000000000), static_cast<long>(left % 1000000000)};
  pollfd pfd{endpoint_->wait_fd, POLLIN, 0};
  ::ppoll(&pfd, 1, &ts, nullptr);
}

TransportStatus OfiTransport::poll(Clock::time_point deadline,
                                   const std::function<void(const InboundMessage&)>& on_message) {
  for (;;) {
    flush_sends();
    if (drain_receives(&on_message) > 0) return TransportStatus::ok;
    const auto now = Clock::now();
    if (now >= deadline) return TransportStatus::timeout;
    wait(deadline);
  }
}

void OfiTransport::suggest_pace(double bytes_per_s) {
  if (options_.rate_bits_per_s > 0 || !(bytes_per_s > 0)) return;  // OPTIREDUCE_RATE wins
  // Never below the default: a calibration call's time includes how late its ranks entered, so
  // one slow call must not throttle every datagram after it (the window protects receivers).
  bucket_.configure(std::max(bytes_per_s, kDefaultPaceBytesPerS), kBurstBytes);
}

std::vector<std::pair<std::string, std::uint64_t>> OfiTransport::counters() const {
  std::vector<std::pair<std::string, std::uint64_t>> out;
  for (std::size_t r = 1; r < rejected_.size(); ++r)
    if (rejected_[r]) out.emplace_back(std::string("rejected_") + to_string(static_cast<DatagramReject>(r)), rejected_[r]);
  if (unknown_sender_) out.emplace_back("rejected_unknown_sender", unknown_sender_);
  out.emplace_back("datagrams_sent", datagrams_sent_);
  out.emplace_back("datagrams_received", datagrams_received_);
  if (send_errors_) out.emplace_back("send_errors", send_errors_);
  if (abandoned_) out.emplace_back("abandoned_datagrams", abandoned_);
  if (fec_group_) {
    out.emplace_back("parity_sent", parity_sent_);
    std::uint64_t repaired = 0;
    for (const auto& d : decoders_) repaired += d.repaired();
    out.emplace_back("fec_repaired", repaired);
  }
  out.emplace_back("pace_bytes_per_s", static_cast<std::uint64_t>(bucket_.rate()));
  return out;
}

}  // namespace

std::unique_ptr<Transport> make_ofi_transport(const OfiOptions& options, std::string& error) {
  auto t = std::make_unique<OfiTransport>(options);
  if (!t->start(error)) return nullptr;
  return t;
}

}  // namespace optireduce
