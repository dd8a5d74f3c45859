#include "message_batch.hpp"

#include <netinet/udp.h>

#include <cerrno>
#include <cstring>

#ifndef UDP_SEGMENT
#define UDP_SEGMENT 103
#endif

namespace optireduce::udp {

void MessageBatch::clear() {
  messages_.clear();
  iov_.clear();
}

void MessageBatch::begin(const sockaddr_in* to, std::uint16_t segment_bytes) {
  messages_.push_back({to, segment_bytes, iov_.size(), 0});
}

void MessageBatch::add_piece(std::span<const std::byte> piece) {
  if (piece.empty()) return;
  iov_.push_back({const_cast<std::byte*>(piece.data()), piece.size()});
  ++messages_.back().iov_count;
}

void MessageBatch::add(const Outgoing& datagram) {
  add_piece(datagram.head);
  add_piece(datagram.header);
  add_piece(datagram.payload);
}

int MessageBatch::send(int fd) {
  headers_.assign(messages_.size(), mmsghdr{});
  controls_.resize(messages_.size());
  for (std::size_t i = 0; i < messages_.size(); ++i) {
    const Message& m = messages_[i];
    msghdr& h = headers_[i].msg_hdr;
    h.msg_name = const_cast<sockaddr_in*>(m.to);
    h.msg_namelen = sizeof(sockaddr_in);
    h.msg_iov = iov_.data() + m.first_iov;
    h.msg_iovlen = m.iov_count;
    if (!m.segment_bytes) continue;
    h.msg_control = controls_[i].data();
    h.msg_controllen = controls_[i].size();
    cmsghdr* c = CMSG_FIRSTHDR(&h);
    c->cmsg_level = SOL_UDP;
    c->cmsg_type = UDP_SEGMENT;
    c->cmsg_len = CMSG_LEN(sizeof(std::uint16_t));
    std::memcpy(CMSG_DATA(c), &m.segment_bytes, sizeof m.segment_bytes);
  }
  const int sent = ::sendmmsg(fd, headers_.data(), static_cast<unsigned>(headers_.size()), MSG_DONTWAIT);
  return sent >= 0 ? sent : -errno;
}

}  // namespace optireduce::udp
