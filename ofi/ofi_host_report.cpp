#include "ofi_host_report.hpp"

#include <algorithm>

#include "ofi_endpoint.hpp"

namespace optireduce::ofi {

std::vector<std::string> host_report(const OfiSettings& settings) {
  FiInfoList list;
  const Status listed = list_datagram_endpoints(settings, list);
  if (!listed.ok()) return {"ofi: " + listed.message()};
  std::vector<std::string> lines;
  for (const fi_info* i = list.head; i; i = i->next) {
    const std::string line = std::string("ofi: ") + i->fabric_attr->prov_name + "/" +
                             (i->domain_attr->name ? i->domain_attr->name : "?") + ", " +
                             std::to_string(std::min<std::size_t>(i->ep_attr->max_msg_size, 65507)) + "-byte datagrams";
    if (std::find(lines.begin(), lines.end(), line) == lines.end()) lines.push_back(line);
  }
  std::vector<const fi_info*> picked;
  const Status chosen = pick_candidates(list.head, settings, picked);
  if (!chosen.ok()) lines.push_back("ofi: " + chosen.message());
  for (const fi_info* i : picked)
    lines.push_back(std::string("ofi: would open ") + i->fabric_attr->prov_name + "/" + (i->domain_attr->name ? i->domain_attr->name : "?"));
  return lines;
}

}  // namespace optireduce::ofi
