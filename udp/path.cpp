#include "path.hpp"

#include <algorithm>
#include <optional>

#include "local_interfaces.hpp"
#include "optireduce/datagram/flow_window.hpp"

namespace optireduce::udp {
namespace {

using Pick = std::optional<std::size_t>;

constexpr std::size_t kMinPathMtu = 576;  // what every IPv4 host must accept
// Each sender's window should hold this many datagrams, or the window stalls on every datagram.
constexpr std::size_t kDatagramsPerWindow = 4;
// Smaller sizes to fall back to, each a linear kernel buffer filled well (2^k less the headroom).
constexpr std::size_t kSmallerDatagrams[] = {32384, 16000, 7808, 3712, 1664};

template <typename Match>
Pick find_endpoint(const Address& a, Match match) {
  for (std::size_t i = 0; i < a.endpoints.size(); ++i)
    if (match(a.endpoints[i])) return i;
  return std::nullopt;
}

// Every rank's pick by `match`, or the ranks that have none.
template <typename Match>
bool pick_all(const std::vector<Address>& ranks, Match match, std::vector<std::size_t>& picks, std::string& lacking) {
  picks.clear();
  lacking.clear();
  for (std::size_t r = 0; r < ranks.size(); ++r) {
    const Pick p = find_endpoint(ranks[r], match);
    if (p) picks.push_back(*p);
    else lacking += (lacking.empty() ? "" : ", ") + std::to_string(r);
  }
  return lacking.empty();
}

bool one_host(const std::vector<Address>& ranks) {
  return std::all_of(ranks.begin(), ranks.end(), [&](const Address& a) { return a.host.same_as(ranks[0].host); });
}

Status pick_outward(const std::vector<Address>& ranks, std::vector<std::size_t>& picks) {
  std::string lacking;
  for (const Endpoint& base : ranks[0].endpoints) {
    if (base.loopback) continue;
    auto in_subnet = [&](const Endpoint& e) { return !e.loopback && e.prefix == base.prefix && same_subnet(e.ip, base.ip, base.prefix); };
    if (pick_all(ranks, in_subnet, picks, lacking)) return Status::Ok();
  }
  auto outward = [](const Endpoint& e) { return !e.loopback; };
  OR_CHECK(pick_all(ranks, outward, picks, lacking), unavailable,
           "udp: the ranks are on different hosts but ranks " + lacking + " have only loopback");
  return Status::Ok();
}

}  // namespace

std::size_t datagram_bytes_for_buffer(std::size_t path_bytes, std::size_t smallest_buffer, int ranks) {
  auto fits = [&](std::size_t d) { return datagram::receive_window_bytes(smallest_buffer, d, ranks) >= kDatagramsPerWindow * d; };
  if (fits(path_bytes)) return path_bytes;
  std::size_t d = path_bytes;
  for (std::size_t smaller : kSmallerDatagrams) {
    if (smaller >= path_bytes) continue;
    d = smaller;
    if (fits(d)) break;
  }
  return d;
}

Status choose_path(const std::vector<Address>& ranks, const std::string& iface, Path& out) {
  OR_CHECK(!ranks.empty(), invalid, "udp: no ranks");
  std::string lacking;
  if (!iface.empty()) {
    auto named = [&](const Endpoint& e) { return e.name == iface; };
    OR_CHECK(pick_all(ranks, named, out.endpoint, lacking), unavailable,
             "OPTIREDUCE_UDP_IFACE=\"" + iface + "\": ranks " + lacking + " have no IPv4 address on it");
  } else if (one_host(ranks)) {
    auto loop = [](const Endpoint& e) { return e.loopback; };
    OR_CHECK(pick_all(ranks, loop, out.endpoint, lacking), unavailable,
             "udp: every rank is on this host but ranks " + lacking + " have no loopback address");
  } else {
    OR_RETURN_IF_ERROR(pick_outward(ranks, out.endpoint));
  }
  std::size_t mtu = ~std::size_t{0}, buffer = ~std::size_t{0};
  for (std::size_t r = 0; r < ranks.size(); ++r) {
    mtu = std::min<std::size_t>(mtu, ranks[r].endpoints[out.endpoint[r]].mtu);
    buffer = std::min<std::size_t>(buffer, ranks[r].endpoints[out.endpoint[r]].receive_buffer);
  }
  OR_CHECK(mtu >= kMinPathMtu, unavailable, "udp: a path MTU of " + std::to_string(mtu) + " bytes is too small");
  out.datagram_bytes =
      datagram_bytes_for_buffer(std::min(mtu - kIpUdpHeaderBytes, kMaxUdpPayload), buffer, static_cast<int>(ranks.size()));
  return Status::Ok();
}

}  // namespace optireduce::udp
