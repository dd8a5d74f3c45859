#include "optireduce/ucx/ucx_lanes.hpp"

#include <cstdio>
#include <cstdlib>
#include <regex>
#include <algorithm>
#include <set>

#include "optireduce/log.hpp"

namespace optireduce::ucx {

namespace {

// The transport names ("cma" of "cma/memory.0") of a lanes_in_use() list.
std::vector<std::string> transport_names(const std::string& chosen) {
  std::vector<std::string> out;
  std::size_t from = 0;
  while (from < chosen.size()) {
    const std::size_t end = std::min(chosen.find(',', from), chosen.size());
    const std::string name = chosen.substr(from, end - from);
    out.push_back(name.substr(0, name.find('/')));
    from = end + 1;
  }
  return out;
}

// UCX's transports through this host's memory (single-copy or mapped segments, and self), and
// those of them that copy straight between two processes.
const std::set<std::string> kSharedMemory{"sysv", "posix", "cma", "xpmem", "knem", "self"};
const std::set<std::string> kSingleCopy{"cma", "xpmem", "knem"};

}  // namespace

bool only_shared_memory(const std::string& chosen) {
  const std::vector<std::string> names = transport_names(chosen);
  return !names.empty() &&
         std::all_of(names.begin(), names.end(), [](const std::string& n) { return kSharedMemory.contains(n); });
}

bool has_single_copy(const std::string& chosen) {
  const std::vector<std::string> names = transport_names(chosen);
  return std::any_of(names.begin(), names.end(), [](const std::string& n) { return kSingleCopy.contains(n); });
}

std::string lanes_in_use(const std::vector<ucp_ep_h>& endpoints) {
  // ucp_ep_print_info lists the lanes of an endpoint; keep the distinct "transport/device" names.
  std::set<std::string> names;
  static const std::regex lane(R"(lane\[\d+\]:\s+\d+:([a-z][a-z0-9_]*/[A-Za-z0-9_.:\-]+))");
  for (ucp_ep_h ep : endpoints) {
    if (!ep) continue;
    char* text = nullptr;
    std::size_t size = 0;
    FILE* stream = open_memstream(&text, &size);
    if (!stream) continue;
    ucp_ep_print_info(ep, stream);
    std::fclose(stream);
    const std::string info(text, size);
    std::free(text);
    OR_LOG(debug, "endpoint configuration:\n%s", info.c_str());
    for (std::sregex_iterator it(info.begin(), info.end(), lane), end; it != end; ++it) names.insert((*it)[1]);
  }
  std::string out;
  for (const auto& n : names) out += (out.empty() ? "" : ",") + n;
  return out.empty() ? "ucx" : out;
}

}  // namespace optireduce::ucx
