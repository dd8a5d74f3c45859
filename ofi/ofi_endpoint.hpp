// One opened libfabric datagram endpoint (FI_EP_DGRAM) with its own fabric, domain, address
// vector and completion queues, and the choice of which endpoints to open.
#pragma once

#include <rdma/fabric.h>
#include <rdma/fi_domain.h>

#include <cstddef>
#include <string>
#include <vector>

#include "optireduce/status.hpp"
#include "optireduce/transport_module.hpp"

namespace optireduce::ofi {

// "fi_fabric: Connection refused" as an io Status.
Status fi_status(const char* what, int rc);

struct FiInfoList {
  fi_info* head = nullptr;
  FiInfoList() = default;
  FiInfoList(const FiInfoList&) = delete;
  FiInfoList& operator=(const FiInfoList&) = delete;
  ~FiInfoList() {
    if (head) fi_freeinfo(head);
  }
};

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

  Endpoint() = default;
  Endpoint(const Endpoint&) = delete;
  Endpoint& operator=(const Endpoint&) = delete;
  ~Endpoint();

  Status open(const fi_info* chosen);
  // "udp/lo": provider and domain.
  std::string describe() const;

 private:
  Status open_queues();
};

// The datagram endpoints libfabric offers here (IPv4 where a provider offers both families).
Status list_datagram_endpoints(const OfiSettings& settings, FiInfoList& list);

// Which of them to open: the named interface, or a loopback one and an outward one (the choice
// between those is made in connect(), once every rank's host identity is known).
Status pick_candidates(const fi_info* list, const OfiSettings& settings, std::vector<const fi_info*>& out);

}  // namespace optireduce::ofi
