#include "udp_socket.hpp"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/udp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstring>
#include <string>

#include "local_interfaces.hpp"

#ifndef UDP_GRO
#define UDP_GRO 104
#endif

namespace optireduce::udp {

UdpSocket& UdpSocket::operator=(UdpSocket&& other) noexcept {
  if (this != &other) {
    close();
    fd_ = other.fd_;
    port_ = other.port_;
    other.fd_ = -1;
  }
  return *this;
}

void UdpSocket::close() {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
}

Status UdpSocket::bind(std::uint32_t ip, std::uint16_t port_first, std::uint16_t port_last, UdpSocket& out) {
  out.close();
  OR_CHECK(port_first <= port_last, invalid, "udp: port range " + std::to_string(port_first) + "-" + std::to_string(port_last));
  const int fd = ::socket(AF_INET, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  OR_CHECK(fd >= 0, io, std::string("udp: socket: ") + std::strerror(errno));
  out.fd_ = fd;
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(ip);
  int error = 0;
  for (unsigned port = port_first; port <= port_last; ++port) {
    a.sin_port = htons(static_cast<std::uint16_t>(port));
    if (::bind(fd, reinterpret_cast<const sockaddr*>(&a), sizeof a) == 0) {
      socklen_t length = sizeof a;
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &length);
      out.port_ = ntohs(a.sin_port);
      return Status::Ok();
    }
    error = errno;
  }
  out.close();
  return Unavailable("udp: cannot bind a socket to " + ip_text(ip) + " on ports " + std::to_string(port_first) + "-" +
                     std::to_string(port_last) + ": " + std::strerror(error));
}

std::size_t UdpSocket::size_buffer(int force_option, int option, std::size_t bytes) {
  const int want = static_cast<int>(std::min<std::size_t>(bytes, INT_MAX / 2));
  if (::setsockopt(fd_, SOL_SOCKET, force_option, &want, sizeof want) != 0)
    ::setsockopt(fd_, SOL_SOCKET, option, &want, sizeof want);  // capped by net.core.[rw]mem_max
  int granted = 0;
  socklen_t length = sizeof granted;
  ::getsockopt(fd_, SOL_SOCKET, option, &granted, &length);
  return granted > 0 ? static_cast<std::size_t>(granted) : 0;
}

std::size_t UdpSocket::size_receive_buffer(std::size_t bytes) { return size_buffer(SO_RCVBUFFORCE, SO_RCVBUF, bytes); }

std::size_t UdpSocket::size_send_buffer(std::size_t bytes) { return size_buffer(SO_SNDBUFFORCE, SO_SNDBUF, bytes); }

bool UdpSocket::enable_gro() {
  const int on = 1;
  return ::setsockopt(fd_, IPPROTO_UDP, UDP_GRO, &on, sizeof on) == 0;
}

Status UdpSocket::forbid_fragmentation() {
  const int mode = IP_PMTUDISC_DO;
  OR_CHECK(::setsockopt(fd_, IPPROTO_IP, IP_MTU_DISCOVER, &mode, sizeof mode) == 0, io,
           std::string("udp: IP_MTU_DISCOVER: ") + std::strerror(errno));
  return Status::Ok();
}

}  // namespace optireduce::udp
