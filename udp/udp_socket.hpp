// One non-blocking IPv4 UDP socket bound to an address of this host.
#pragma once

#include <cstddef>
#include <cstdint>

#include "optireduce/status.hpp"

namespace optireduce::udp {

// What every socket asks of the kernel (which doubles both, for its bookkeeping): a call's worth
// of datagrams in flight. Without CAP_NET_ADMIN the kernel caps them at net.core.rmem_max and
// net.core.wmem_max.
inline constexpr std::size_t kWantedReceiveBufferBytes = 8u << 20;
inline constexpr std::size_t kWantedSendBufferBytes = 4u << 20;

class UdpSocket {
 public:
  UdpSocket() = default;
  ~UdpSocket() { close(); }
  UdpSocket(UdpSocket&& other) noexcept : fd_(other.fd_), port_(other.port_) { other.fd_ = -1; }
  UdpSocket& operator=(UdpSocket&& other) noexcept;
  UdpSocket(const UdpSocket&) = delete;
  UdpSocket& operator=(const UdpSocket&) = delete;

  // Binds to `ip` (host order) on a port in [port_first, port_last]; 0 and 0: any port.
  static Status bind(std::uint32_t ip, std::uint16_t port_first, std::uint16_t port_last, UdpSocket& out);

  int fd() const { return fd_; }
  std::uint16_t port() const { return port_; }

  // Asks for `bytes` (forced past the sysctl limit where the process may, else up to it) and
  // returns what the kernel granted, as getsockopt reports it.
  std::size_t size_receive_buffer(std::size_t bytes);
  std::size_t size_send_buffer(std::size_t bytes);
  // Receive offload: the kernel hands over runs of same-sized datagrams in one buffer.
  bool enable_gro();
  // Datagrams larger than the path MTU fail instead of being fragmented.
  Status forbid_fragmentation();
  void close();

 private:
  std::size_t size_buffer(int force_option, int option, std::size_t bytes);
  int fd_ = -1;
  std::uint16_t port_ = 0;
};

}  // namespace optireduce::udp
