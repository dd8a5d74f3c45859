#include "ofi_endpoint.hpp"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_errno.h>

#include <cstring>

namespace optireduce::ofi {
namespace {

constexpr std::uint32_t kFiVersion = FI_VERSION(1, 9);

bool is_loopback(const fi_info* info) {
  if (info->domain_attr && info->domain_attr->name && std::strcmp(info->domain_attr->name, "lo") == 0) return true;
  if (!info->src_addr) return false;
  const auto* sa = static_cast<const sockaddr*>(info->src_addr);
  if (sa->sa_family == AF_INET)
    return (ntohl(static_cast<const sockaddr_in*>(info->src_addr)->sin_addr.s_addr) >> 24) == 127;
  if (sa->sa_family == AF_INET6) return IN6_IS_ADDR_LOOPBACK(&static_cast<const sockaddr_in6*>(info->src_addr)->sin6_addr);
  return false;
}

const char* domain_name(const fi_info* i) { return i->domain_attr && i->domain_attr->name ? i->domain_attr->name : ""; }

// Another entry of the same provider and domain offers IPv4: one address per interface is enough.
bool has_ipv4_twin(const fi_info* list, const fi_info* i) {
  for (const fi_info* j = list; j; j = j->next)
    if (j->addr_format == FI_SOCKADDR_IN && !std::strcmp(j->fabric_attr->prov_name, i->fabric_attr->prov_name) &&
        !std::strcmp(domain_name(j), domain_name(i)))
      return true;
  return false;
}

std::string no_endpoint_message(const OfiSettings& settings) {
  return settings.provider.empty() ? "libfabric offers no datagram (FI_EP_DGRAM) endpoint"
                                   : "OPTIREDUCE_OFI_PROVIDER=\"" + settings.provider +
                                         "\" offers no datagram endpoint here (fi_info -t FI_EP_DGRAM lists those that do)";
}

}  // namespace

Status fi_status(const char* what, int rc) { return IoError(std::string(what) + ": " + fi_strerror(-rc)); }

Endpoint::~Endpoint() {
  if (ep) fi_close(&ep->fid);
  if (rx_cq) fi_close(&rx_cq->fid);
  if (tx_cq) fi_close(&tx_cq->fid);
  if (av) fi_close(&av->fid);
  if (domain) fi_close(&domain->fid);
  if (fabric) fi_close(&fabric->fid);
  if (info) fi_freeinfo(info);
}

Status Endpoint::open_queues() {
  fi_cq_attr cq_attr{};
  cq_attr.format = FI_CQ_FORMAT_MSG;
  cq_attr.size = info->tx_attr->size;
  cq_attr.wait_obj = FI_WAIT_NONE;
  if (int rc = fi_cq_open(domain, &cq_attr, &tx_cq, nullptr)) return fi_status("fi_cq_open (send)", rc);
  cq_attr.size = info->rx_attr->size;
  cq_attr.wait_obj = FI_WAIT_FD;
  if (int rc = fi_cq_open(domain, &cq_attr, &rx_cq, nullptr)) return fi_status("fi_cq_open (receive)", rc);
  if (int rc = fi_control(&rx_cq->fid, FI_GETWAIT, &wait_fd)) return fi_status("fi_control(FI_GETWAIT)", rc);
  return Status::Ok();
}

Status Endpoint::open(const fi_info* chosen) {
  info = fi_dupinfo(chosen);
  loopback = is_loopback(info);
  if (int rc = fi_fabric(info->fabric_attr, &fabric, nullptr)) return fi_status("fi_fabric", rc);
  if (int rc = fi_domain(fabric, info, &domain, nullptr)) return fi_status("fi_domain", rc);
  fi_av_attr av_attr{};
  av_attr.type = FI_AV_TABLE;
  if (int rc = fi_av_open(domain, &av_attr, &av, nullptr)) return fi_status("fi_av_open", rc);
  OR_RETURN_IF_ERROR(open_queues());
  if (int rc = fi_endpoint(domain, info, &ep, nullptr)) return fi_status("fi_endpoint", rc);
  if (int rc = fi_ep_bind(ep, &av->fid, 0)) return fi_status("fi_ep_bind(av)", rc);
  if (int rc = fi_ep_bind(ep, &tx_cq->fid, FI_TRANSMIT)) return fi_status("fi_ep_bind(send cq)", rc);
  if (int rc = fi_ep_bind(ep, &rx_cq->fid, FI_RECV)) return fi_status("fi_ep_bind(receive cq)", rc);
  if (int rc = fi_enable(ep)) return fi_status("fi_enable", rc);
  std::size_t length = 256;
  name.resize(length);
  if (int rc = fi_getname(&ep->fid, name.data(), &length)) return fi_status("fi_getname", rc);
  name.resize(length);
  return Status::Ok();
}

std::string Endpoint::describe() const { return std::string(info->fabric_attr->prov_name) + "/" + domain_name(info); }

Status list_datagram_endpoints(const OfiSettings& settings, FiInfoList& list) {
  fi_info* hints = fi_allocinfo();
  OR_CHECK(hints, unavailable, "fi_allocinfo failed");
  hints->ep_attr->type = FI_EP_DGRAM;
  hints->caps = FI_MSG | FI_SOURCE;
  hints->mode = FI_CONTEXT | FI_CONTEXT2 | FI_MSG_PREFIX;
  hints->domain_attr->threading = FI_THREAD_DOMAIN;
  if (!settings.provider.empty()) hints->fabric_attr->prov_name = strdup(settings.provider.c_str());
  int rc = fi_getinfo(kFiVersion, nullptr, nullptr, 0, hints, &list.head);
  if (rc == -FI_ENODATA) {  // a provider without FI_SOURCE: the datagram's tag still names the sender
    hints->caps = FI_MSG;
    rc = fi_getinfo(kFiVersion, nullptr, nullptr, 0, hints, &list.head);
  }
  fi_freeinfo(hints);
  if (rc == -FI_ENODATA) return Unavailable(no_endpoint_message(settings));
  if (rc) return fi_status("fi_getinfo", rc);
  return Status::Ok();
}

Status pick_candidates(const fi_info* list, const OfiSettings& settings, std::vector<const fi_info*>& out) {
  const std::string provider = settings.provider.empty() && list ? list->fabric_attr->prov_name : settings.provider;
  std::vector<const fi_info*> mine;
  std::string offered;
  for (const fi_info* i = list; i; i = i->next) {
    if (provider != i->fabric_attr->prov_name) continue;
    if (i->addr_format == FI_SOCKADDR_IN6 && has_ipv4_twin(list, i)) continue;
    const std::string domain = domain_name(i);
    if (("," + offered).find("," + domain + ",") == std::string::npos) offered += domain + ",";
    mine.push_back(i);
  }
  OR_CHECK(!mine.empty(), unavailable, no_endpoint_message(settings));
  offered.pop_back();
  out.clear();
  if (!settings.iface.empty()) {
    for (const fi_info* i : mine) {
      if (settings.iface != domain_name(i)) continue;
      out.push_back(i);
      return Status::Ok();
    }
    return Unavailable("OPTIREDUCE_OFI_IFACE=\"" + settings.iface + "\": provider " + provider +
                       " has no datagram endpoint on it; it offers: " + offered);
  }
  const fi_info* loop = nullptr;
  const fi_info* outward = nullptr;
  for (const fi_info* i : mine) {
    const fi_info*& first = is_loopback(i) ? loop : outward;
    if (!first) first = i;
  }
  if (loop) out.push_back(loop);
  if (outward) out.push_back(outward);
  return Status::Ok();
}

}  // namespace optireduce::ofi
