#include "fabric_providers.hpp"

#include <algorithm>

#ifdef OPTIREDUCE_HAVE_LIBFABRIC
#include <rdma/fabric.h>
#include <rdma/fi_errno.h>
#endif

namespace optireduce::tools {

FabricProviders datagram_providers() {
  FabricProviders out;
#ifdef OPTIREDUCE_HAVE_LIBFABRIC
  fi_info* hints = fi_allocinfo();
  if (!hints) {
    out.error = "fi_allocinfo failed";
    return out;
  }
  hints->ep_attr->type = FI_EP_DGRAM;
  hints->caps = FI_MSG;
  fi_info* list = nullptr;
  const int rc = fi_getinfo(FI_VERSION(FI_MAJOR_VERSION, FI_MINOR_VERSION), nullptr, nullptr, 0, hints, &list);
  fi_freeinfo(hints);
  if (rc == -FI_ENODATA) return out;  // no provider offers datagrams: an empty list, not an error
  if (rc != 0) {
    out.error = std::string("fi_getinfo: ") + fi_strerror(-rc);
    return out;
  }
  // One entry per endpoint flavour (addressing, progress, ...): keep one per provider/fabric/domain.
  for (fi_info* i = list; i; i = i->next) {
    FabricProvider p{i->fabric_attr && i->fabric_attr->prov_name ? i->fabric_attr->prov_name : "?",
                     i->fabric_attr && i->fabric_attr->name ? i->fabric_attr->name : "?",
                     i->domain_attr && i->domain_attr->name ? i->domain_attr->name : "?"};
    const bool seen = std::any_of(out.providers.begin(), out.providers.end(), [&](const FabricProvider& q) {
      return q.provider == p.provider && q.fabric == p.fabric && q.domain == p.domain;
    });
    if (!seen) out.providers.push_back(std::move(p));
  }
  fi_freeinfo(list);
#else
  out.error = "not built with libfabric";
#endif
  return out;
}

}  // namespace optireduce::tools
