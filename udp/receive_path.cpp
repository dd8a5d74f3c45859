#include "receive_path.hpp"

#include <netinet/udp.h>

#include <cerrno>
#include <cstring>

#include "segmentation.hpp"

#ifndef UDP_GRO
#define UDP_GRO 104
#endif

namespace optireduce::udp {
namespace {

// The segment size UDP_GRO reports for a joined buffer, 0 when the buffer is one datagram.
std::size_t gro_segment_bytes(msghdr& h) {
  for (cmsghdr* c = CMSG_FIRSTHDR(&h); c; c = CMSG_NXTHDR(&h, c)) {
    if (c->cmsg_level != SOL_UDP || c->cmsg_type != UDP_GRO || c->cmsg_len < CMSG_LEN(sizeof(int))) continue;
    int segment = 0;
    std::memcpy(&segment, CMSG_DATA(c), sizeof segment);
    return segment > 0 ? static_cast<std::size_t>(segment) : 0;
  }
  return 0;
}

}  // namespace

ReceivePath::ReceivePath(datagram::ReceiveDispatch& dispatch, const std::vector<sockaddr_in>& peers,
                         TransportCounters& counters)
    : dispatch_(dispatch), counters_(counters), buffers_(kBuffers * kBufferBytes), headers_(kBuffers), iov_(kBuffers),
      from_(kBuffers), controls_(kBuffers) {
  for (std::size_t r = 0; r < peers.size(); ++r) rank_of_.emplace(key(peers[r]), static_cast<int>(r));
}

int ReceivePath::origin_of(const sockaddr_in& from) const {
  if (from.sin_family != AF_INET) return -1;
  const auto it = rank_of_.find(key(from));
  return it == rank_of_.end() ? -1 : it->second;
}

void ReceivePath::deliver(std::span<const std::byte> buffer, std::size_t segment_bytes, bool truncated,
                          const sockaddr_in& from, Clock::time_point arrived, datagram::DatagramSink& sink) {
  if (truncated) {
    ++counters_.rejected_malformed;
    return;
  }
  const int origin = origin_of(from);
  const GroSegments segments(buffer, segment_bytes);
  for (std::size_t i = 0; i < segments.size(); ++i) dispatch_.dispatch({segments[i], origin, arrived}, sink, counters_);
}

std::size_t ReceivePath::read_batch(int fd, datagram::DatagramSink& sink) {
  for (std::size_t i = 0; i < kBuffers; ++i) {
    iov_[i] = {buffers_.data() + i * kBufferBytes, kBufferBytes};
    msghdr& h = headers_[i].msg_hdr;
    h = msghdr{};
    h.msg_name = &from_[i];
    h.msg_namelen = sizeof(sockaddr_in);
    h.msg_iov = &iov_[i];
    h.msg_iovlen = 1;
    h.msg_control = controls_[i].data();
    h.msg_controllen = controls_[i].size();
  }
  ++counters_.receive_calls;
  const int n = ::recvmmsg(fd, headers_.data(), kBuffers, MSG_DONTWAIT, nullptr);
  if (n <= 0) return 0;
  counters_.receive_buffers += static_cast<std::uint64_t>(n);
  const auto arrived = Clock::now();
  for (int i = 0; i < n; ++i) {
    msghdr& h = headers_[static_cast<std::size_t>(i)].msg_hdr;
    const bool truncated = (h.msg_flags & MSG_TRUNC) != 0;
    const std::span<const std::byte> buffer(buffers_.data() + static_cast<std::size_t>(i) * kBufferBytes,
                                            headers_[static_cast<std::size_t>(i)].msg_len);
    deliver(buffer, gro_segment_bytes(h), truncated, from_[static_cast<std::size_t>(i)], arrived, sink);
  }
  return static_cast<std::size_t>(n);
}

std::size_t ReceivePath::read(int fd, datagram::DatagramSink& sink, int max_batches) {
  std::size_t total = 0;
  for (int b = 0; b < max_batches; ++b) {
    const std::size_t n = read_batch(fd, sink);
    total += n;
    if (n < kBuffers) break;  // the socket is empty
  }
  return total;
}

}  // namespace optireduce::udp
