// The receive side of the UDP transport: recvmmsg into large buffers, each buffer split into the
// datagrams the kernel joined (UDP_GRO), each datagram with the rank its source address belongs
// to handed to the one dispatch of datagram/. The fuzz harness feeds deliver() directly.
#pragma once

#include <netinet/in.h>
#include <sys/socket.h>

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <unordered_map>
#include <vector>

#include "optireduce/datagram/dispatch.hpp"
#include "optireduce/transport.hpp"

namespace optireduce::udp {

class ReceivePath {
 public:
  static constexpr std::size_t kBufferBytes = 65536;  // the largest a UDP datagram or GRO run can be
  static constexpr std::size_t kBuffers = 16;          // per recvmmsg

  // `peers`: every rank's endpoint, by rank.
  ReceivePath(datagram::ReceiveDispatch& dispatch, const std::vector<sockaddr_in>& peers, TransportCounters& counters);

  // Reads what is waiting, at most `max_batches` recvmmsg calls; returns the buffers read.
  std::size_t read(int fd, datagram::DatagramSink& sink, int max_batches);

  // One buffer as the kernel returned it: `segment_bytes` from UDP_GRO (0: one datagram),
  // `truncated` from MSG_TRUNC (the buffer is then not trusted at all).
  void deliver(std::span<const std::byte> buffer, std::size_t segment_bytes, bool truncated, const sockaddr_in& from,
               Clock::time_point arrived, datagram::DatagramSink& sink);

  // The rank whose endpoint `from` is, -1 for any other address.
  int origin_of(const sockaddr_in& from) const;

 private:
  using Control = std::array<char, CMSG_SPACE(sizeof(int))>;
  static std::uint64_t key(const sockaddr_in& a) {
    return (std::uint64_t{a.sin_addr.s_addr} << 16) | a.sin_port;
  }
  std::size_t read_batch(int fd, datagram::DatagramSink& sink);

  datagram::ReceiveDispatch& dispatch_;
  TransportCounters& counters_;
  std::unordered_map<std::uint64_t, int> rank_of_;
  std::vector<std::byte> buffers_;
  std::vector<mmsghdr> headers_;
  std::vector<iovec> iov_;
  std::vector<sockaddr_in> from_;
  std::vector<Control> controls_;
};

}  // namespace optireduce::udp
