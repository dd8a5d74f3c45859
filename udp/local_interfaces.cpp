#include "local_interfaces.hpp"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/in.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstring>

namespace optireduce::udp {
namespace {

std::uint32_t interface_mtu(int probe, const char* name) {
  ifreq req{};
  std::strncpy(req.ifr_name, name, IFNAMSIZ - 1);
  return ::ioctl(probe, SIOCGIFMTU, &req) == 0 && req.ifr_mtu > 0 ? static_cast<std::uint32_t>(req.ifr_mtu) : 0;
}

}  // namespace

std::string ip_text(std::uint32_t ip) {
  in_addr a{htonl(ip)};
  char text[INET_ADDRSTRLEN] = {};
  ::inet_ntop(AF_INET, &a, text, sizeof text);
  return text;
}

bool same_subnet(std::uint32_t ip, std::uint32_t base, std::uint8_t prefix) {
  if (prefix == 0) return true;
  const std::uint32_t mask = prefix >= 32 ? ~0u : ~((1u << (32 - prefix)) - 1);
  return (ip & mask) == (base & mask);
}

Status ipv4_interfaces(std::vector<LocalInterface>& out) {
  ifaddrs* list = nullptr;
  OR_CHECK(::getifaddrs(&list) == 0, io, std::string("getifaddrs: ") + std::strerror(errno));
  const int probe = ::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  out.clear();
  for (const ifaddrs* i = list; i; i = i->ifa_next) {
    if (!i->ifa_addr || i->ifa_addr->sa_family != AF_INET || !(i->ifa_flags & IFF_UP)) continue;
    LocalInterface li;
    li.name = i->ifa_name;
    li.ip = ntohl(reinterpret_cast<const sockaddr_in*>(i->ifa_addr)->sin_addr.s_addr);
    if (i->ifa_netmask)
      li.prefix = static_cast<std::uint8_t>(std::popcount(ntohl(reinterpret_cast<const sockaddr_in*>(i->ifa_netmask)->sin_addr.s_addr)));
    li.loopback = (i->ifa_flags & IFF_LOOPBACK) != 0;
    li.mtu = probe >= 0 ? interface_mtu(probe, i->ifa_name) : 0;
    if (li.mtu) out.push_back(li);
  }
  if (probe >= 0) ::close(probe);
  ::freeifaddrs(list);
  std::stable_partition(out.begin(), out.end(), [](const LocalInterface& li) { return li.loopback; });
  return Status::Ok();
}

}  // namespace optireduce::udp
