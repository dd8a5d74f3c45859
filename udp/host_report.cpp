#include "host_report.hpp"

#include <netinet/in.h>
#include <netinet/udp.h>
#include <sys/socket.h>

#include <fstream>

#include "local_interfaces.hpp"
#include "optireduce/datagram/flow_window.hpp"
#include "path.hpp"
#include "segmentation.hpp"
#include "udp_socket.hpp"

#ifndef UDP_SEGMENT
#define UDP_SEGMENT 103
#endif
#ifndef UDP_GRO
#define UDP_GRO 104
#endif

namespace optireduce::udp {
namespace {

// The ranks the window line is worked out for (a typical node's worth).
constexpr int kExampleRanks = 4;

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

// Whether the kernel takes the segmentation and receive offload options on a socket (UDP_SEGMENT
// since Linux 4.18, UDP_GRO since 5.0); a send may still be refused (EIO) where a device lacks
// checksum offload, and the transport then sends datagrams one by one.
std::string offload_line(const UdpSocket& probe) {
  const int segment = 1400, on = 1;
  const bool gso = ::setsockopt(probe.fd(), IPPROTO_UDP, UDP_SEGMENT, &segment, sizeof segment) == 0;
  const bool gro = ::setsockopt(probe.fd(), IPPROTO_UDP, UDP_GRO, &on, sizeof on) == 0;
  return std::string("udp: offloads: segmentation (UDP_SEGMENT, GSO) ") + (gso ? "yes" : "no") +
         ", receive offload (UDP_GRO) " + (gro ? "yes" : "no");
}

// What the kernel grants a socket, against the limits, and what that leaves the flow window.
std::vector<std::string> buffer_lines(UdpSocket& probe) {
  const std::size_t rmem_max = sysctl_bytes("/proc/sys/net/core/rmem_max");
  const std::size_t wmem_max = sysctl_bytes("/proc/sys/net/core/wmem_max");
  const std::size_t granted = probe.size_receive_buffer(kWantedReceiveBufferBytes);
  const std::size_t sent = probe.size_send_buffer(kWantedSendBufferBytes);
  std::vector<std::string> lines;
  std::string line = "udp: socket buffers: receive " + std::to_string(granted) + " bytes, send " + std::to_string(sent) +
                     " bytes granted (net.core.rmem_max = " + std::to_string(rmem_max) +
                     ", net.core.wmem_max = " + std::to_string(wmem_max) + ")";
  if (granted > 2 * rmem_max) line += "; past the limits: CAP_NET_ADMIN";
  lines.push_back(line);
  // The loopback path, where the datagrams are largest, and so is the window they need.
  const std::size_t datagram = datagram_bytes_for_buffer(kMaxUdpPayload, granted, kExampleRanks);
  lines.push_back("udp: with this receive buffer, " + std::to_string(kExampleRanks) + " ranks over loopback: " +
                  std::to_string(datagram) + "-byte datagrams, a flow window of " +
                  std::to_string(datagram::receive_window_bytes(granted, datagram, kExampleRanks)) + " bytes per sender");
  if (granted < kWantedReceiveBufferBytes)
    lines.push_back("udp: the receive buffer is small: smaller datagrams, a smaller window, more waiting for "
                    "confirmations; raise the limits (root): sysctl -w net.core.rmem_max=" +
                    std::to_string(kWantedReceiveBufferBytes) + " net.core.wmem_max=" +
                    std::to_string(kWantedSendBufferBytes) + ", or give the job CAP_NET_ADMIN");
  return lines;
}

}  // namespace

std::vector<std::string> host_report(const UdpSettings& settings) {
  std::vector<std::string> lines;
  std::vector<LocalInterface> interfaces;
  const Status s = ipv4_interfaces(interfaces);
  if (!s.ok()) return {"udp: " + s.text()};
  for (const auto& li : interfaces) lines.push_back(interface_line(li, settings));
  UdpSocket probe;
  if (const Status bound = UdpSocket::bind(0x7f000001u, 0, 0, probe); !bound.ok()) {
    lines.push_back("udp: " + bound.text());
  } else {
    lines.push_back(offload_line(probe));
    for (auto& line : buffer_lines(probe)) lines.push_back(std::move(line));
  }
  lines.push_back(std::string("udp: authentication ") + (settings.authenticate ? "on (UMAC-64)" : "off (OPTIREDUCE_AUTH=off)"));
  return lines;
}

}  // namespace optireduce::udp
