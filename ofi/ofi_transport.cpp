#include "ofi_transport.hpp"

#include <rdma/fi_domain.h>

#include <algorithm>
#include <fstream>

#include "optireduce/log.hpp"

namespace optireduce::ofi {
namespace {

constexpr std::size_t kReceivesPosted = 512;  // udp offers 1024; half keeps headroom for reposts
// Pace before (and at least) what the calibration calls suggest: 2.4 Gbit/s per rank.
constexpr double kDefaultPaceBytesPerS = 300e6;
// Most that one rank puts in front of its receivers at once: a share of one receiver's default
// socket buffer, which every sender fills together.
constexpr double kBurstBytes = 48 * 1024;

// The udp provider keeps the kernel's default receive buffer: the flow window follows it.
std::size_t provider_receive_buffer() {
  std::size_t rcvbuf = 212992;
  std::ifstream("/proc/sys/net/core/rmem_default") >> rcvbuf;
  return rcvbuf;
}

}  // namespace

OfiTransport::OfiTransport(const OfiSettings& settings)
    : DatagramTransport("ofi", datagram::TokenBucket(settings.rate_bits_per_s > 0 ? settings.rate_bits_per_s / 8
                                                                                  : kDefaultPaceBytesPerS,
                                                     kBurstBytes),
                        settings.rate_bits_per_s > 0),
      settings_(settings) {}

OfiTransport::~OfiTransport() = default;

Status OfiTransport::start() {
  OR_CHECK(settings_.fec_group <= datagram::kMaxFecGroup, invalid,
           "ofi: FEC groups of " + std::to_string(settings_.fec_group) + " datagrams");
  FiInfoList list;
  OR_RETURN_IF_ERROR(list_datagram_endpoints(settings_, list));
  std::vector<const fi_info*> picked;
  OR_RETURN_IF_ERROR(pick_candidates(list.head, settings_, picked));
  Status last;
  for (const fi_info* info : picked) {
    auto e = std::make_unique<Endpoint>();
    last = e->open(info);
    if (!last.ok()) {
      OR_LOG(debug, "ofi: cannot open %s/%s: %s", info->fabric_attr->prov_name, info->domain_attr->name, last.text().c_str());
      continue;
    }
    candidates_.push_back(std::move(e));
  }
  if (candidates_.empty()) return picked.size() == 1 ? last : Unavailable("ofi: no datagram endpoint could be opened");
  OR_RETURN_IF_ERROR(datagram::draw_secret(secret_));
  OfiAddress mine;
  mine.authenticate = settings_.authenticate;
  mine.secret = secret_;
  mine.host = datagram::this_host();
  for (const auto& e : candidates_) (e->loopback ? mine.loopback : mine.outward) = e->name;
  address_ = encode(mine);
  return Status::Ok();
}

// Every rank sees the same addresses, so every rank chooses alike: loopback when all share this
// kernel and namespace (or loopback is all every rank has), else the outward endpoints.
Status OfiTransport::choose_endpoint(const std::vector<OfiAddress>& all, bool& use_loopback) {
  bool all_local = true, all_loop = true, all_outward = true;
  for (const auto& a : all) {
    all_local = all_local && a.host.same_as(all[static_cast<std::size_t>(rank_)].host);
    all_loop = all_loop && !a.loopback.empty();
    all_outward = all_outward && !a.outward.empty();
  }
  use_loopback = all_loop && (all_local || !all_outward);
  OR_CHECK(use_loopback || all_outward, unavailable,
           "ofi: the ranks have no datagram interface in common (some ranks have only loopback); set OPTIREDUCE_OFI_IFACE");
  for (auto& e : candidates_)
    if (e->loopback == use_loopback || candidates_.size() == 1) endpoint_ = e.get();
  OR_CHECK(endpoint_, unavailable, "ofi: no endpoint of this rank fits the path the ranks agree on");
  std::erase_if(candidates_, [&](const auto& e) { return e.get() != endpoint_; });
  if (use_loopback && !all_local)
    OR_LOG(warn, "ofi: ranks are in different network namespaces or hosts but only loopback is available; datagrams may not arrive");
  return Status::Ok();
}

Status OfiTransport::configure(const std::vector<OfiAddress>& all, bool use_loopback) {
  const fi_info* info = endpoint_->info;
  prefix_ = (info->mode & FI_MSG_PREFIX) ? info->ep_attr->msg_prefix_size : 0;
  max_datagram_ = std::min<std::size_t>(info->ep_attr->max_msg_size, 65507);
  const std::size_t parity_room = settings_.fec_group ? datagram::Header::kSize + datagram::ParityEncoder::table_bytes(settings_.fec_group) : 0;
  OR_CHECK(max_datagram_ > datagram::Header::kSize + parity_room + datagram::Header::kMaxEngineHeader + 256, unavailable,
           "ofi: " + endpoint_->describe() + " carries at most " + std::to_string(max_datagram_) + " bytes per datagram, too few");
  // With FEC a parity carries a whole member datagram behind its own header and table.
  max_message_ = max_datagram_ - datagram::Header::kSize - parity_room;
  copy_payload_ = info->tx_attr->iov_limit < 2;
  has_source_ = (info->caps & FI_SOURCE) != 0;
  addresses_.assign(static_cast<std::size_t>(ranks_), FI_ADDR_NOTAVAIL);
  for (int r = 0; r < ranks_; ++r) {
    const auto& name = use_loopback ? all[static_cast<std::size_t>(r)].loopback : all[static_cast<std::size_t>(r)].outward;
    OR_CHECK(fi_av_insert(endpoint_->av, name.data(), 1, &addresses_[static_cast<std::size_t>(r)], 0, nullptr) == 1, io,
             "ofi: cannot insert the address of rank " + std::to_string(r));
    rank_of_[addresses_[static_cast<std::size_t>(r)]] = r;
  }
  // Rank 0's secret keys the job.
  OR_RETURN_IF_ERROR(key_job(settings_.authenticate, all[0].secret));
  windows_.assign(static_cast<std::size_t>(ranks_),
                  datagram::FlowWindow(datagram::receive_window_bytes(provider_receive_buffer(), max_datagram_, ranks_)));
  dispatch_ = std::make_unique<datagram::ReceiveDispatch>(rank_, ranks_, authenticator_.get(), settings_.fec_group, max_datagram_);
  inbound_ = std::make_unique<datagram::InboundHandler>(handshake_, windows_, static_cast<datagram::ControlReplies&>(*this));
  in_flight_.assign(static_cast<std::size_t>(ranks_), 0);
  queues_.assign(static_cast<std::size_t>(ranks_), {});
  encoders_.assign(static_cast<std::size_t>(ranks_), datagram::ParityEncoder(settings_.fec_group));
  return post_receives();
}

Status OfiTransport::post_receives() {
  const std::size_t posted = std::min<std::size_t>(kReceivesPosted, endpoint_->info->rx_attr->size);
  for (std::size_t i = 0; i < posted; ++i) {
    auto b = std::make_unique<RxBuffer>();
    b->data.resize(prefix_ + max_datagram_);
    OR_CHECK(post_receive(*b), io, "ofi: cannot post receive buffers");
    receives_.push_back(std::move(b));
  }
  return Status::Ok();
}

Status OfiTransport::open_paths(const std::vector<std::vector<std::byte>>& addresses) {
  std::vector<OfiAddress> all;
  OR_RETURN_IF_ERROR(read_addresses(addresses, settings_.authenticate, all));
  bool use_loopback = false;
  OR_RETURN_IF_ERROR(choose_endpoint(all, use_loopback));
  return configure(all, use_loopback);
}

void OfiTransport::greet(const std::vector<int>& peers) {
  for (int peer : peers) {
    const std::byte body[datagram::kHelloBytes] = {std::byte{handshake_.flags_for(peer)}};
    queue_datagram(peer, datagram::Kind::hello, {}, body, false, true);
  }
  flush_sends();
}

std::string OfiTransport::describe() const { return endpoint_ ? endpoint_->describe() : "ofi (not connected)"; }

void OfiTransport::follow_pace(double bytes_per_s) {
  // Never below the default: a calibration call's time includes how late its ranks entered, so
  // one slow call must not throttle every datagram after it (the window protects receivers).
  bucket_.configure(std::max(bytes_per_s, kDefaultPaceBytesPerS), kBurstBytes);
}

}  // namespace optireduce::ofi
