#include "host_report.hpp"

#include <fstream>

#include "local_interfaces.hpp"
#include "path.hpp"
#include "segmentation.hpp"
#include "udp_socket.hpp"

namespace optireduce::udp {
namespace {

constexpr std::size_t kWantedReceiveBuffer = 8u << 20;

// A sysctl's value in bytes, 0 when it cannot be read.
std::size_t sysctl_bytes(const char* path) {
  std::size_t v = 0;
  std::ifstream(path) >> v;
  return v;
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
  const std::size_t limit = sysctl_bytes("/proc/sys/net/core/rmem_max");
  std::string line = "udp: net.core.rmem_max = " + std::to_string(limit);
  UdpSocket probe;
  if (!UdpSocket::bind(0x7f000001u, 0, 0, probe).ok()) return line;
  const std::size_t granted = probe.size_receive_buffer(kWantedReceiveBuffer);
  line += ", receive buffer " + std::to_string(granted) + " bytes granted";
  if (granted > 2 * limit) line += " (past the limit: CAP_NET_ADMIN)";
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
