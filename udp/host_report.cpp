#include "host_report.hpp"

#include <fstream>

#include "local_interfaces.hpp"
#include "path.hpp"
#include "segmentation.hpp"
#include "udp_socket.hpp"

namespace optireduce::udp {
namespace {

constexpr std::size_t kWantedReceiveBuffer = 8u << 20;

std::string sysctl(const char* path) {
  std::string v;
  std::ifstream(path) >> v;
  return v.empty() ? "?" : v;
}

std::string interface_line(const LocalInterface& li, const UdpSettings& settings) {
  const std::size_t datagram = std::min<std::size_t>(li.mtu - kIpUdpHeaderBytes, kMaxUdpPayload);
  std::string line = "udp: " + li.name + " " + ip_text(li.ip) + "/" + std::to_string(li.prefix) + ", MTU " +
                     std::to_string(li.mtu) + ": ";
  if (2 * datagram <= kMaxUdpPayload)
    line += std::to_string(datagram) + "-byte segments, " + std::to_string(std::min(kMaxGsoSegments, kMaxUdpPayload / datagram)) +
            " per GSO send";
  else
    line += std::to_string(datagram) + "-byte datagrams";
  if (!settings.iface.empty() && settings.iface == li.name) line += " (OPTIREDUCE_UDP_IFACE)";
  return line;
}

// Whether this process may pass net.core.rmem_max (CAP_NET_ADMIN), and what it gets.
std::string buffer_line() {
  UdpSocket probe;
  const std::string limit = sysctl("/proc/sys/net/core/rmem_max");
  if (!UdpSocket::bind(0x7f000001u, 0, 0, probe).ok()) return "udp: net.core.rmem_max = " + limit;
  const std::size_t granted = probe.size_receive_buffer(kWantedReceiveBuffer);
  std::string line = "udp: receive buffer " + std::to_string(granted) + " bytes granted (net.core.rmem_max = " + limit + ")";
  if (granted < 2 * kWantedReceiveBuffer)
    line += "; a small buffer means a small flow window: raise it with sysctl -w net.core.rmem_max=" +
            std::to_string(kWantedReceiveBuffer);
  return line;
}

}  // namespace

std::vector<std::string> host_report(const UdpSettings& settings) {
  std::vector<std::string> lines;
  std::vector<LocalInterface> interfaces;
  const Status s = ipv4_interfaces(interfaces);
  if (!s.ok()) return {"udp: " + s.text()};
  for (const auto& li : interfaces) lines.push_back(interface_line(li, settings));
  lines.push_back(buffer_line());
  lines.push_back(std::string("udp: authentication ") + (settings.authenticate ? "on (AES-128-GMAC)" : "off (OPTIREDUCE_AUTH=off)"));
  return lines;
}

}  // namespace optireduce::udp
