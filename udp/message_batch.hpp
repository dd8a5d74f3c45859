// The messages of one sendmmsg call: each one datagram, or a run of datagrams to one peer that the
// kernel cuts into segments (UDP_SEGMENT). Storage is kept between calls.
#pragma once

#include <netinet/in.h>
#include <sys/socket.h>

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "outgoing.hpp"

namespace optireduce::udp {

class MessageBatch {
 public:
  void clear();
  // Starts a message to `to`; `segment_bytes` > 0 asks the kernel to cut it into datagrams of
  // that size (the last may be shorter).
  void begin(const sockaddr_in* to, std::uint16_t segment_bytes);
  // Appends one datagram to the current message.
  void add(const Outgoing& datagram);
  bool segmented(std::size_t message) const { return messages_[message].segment_bytes != 0; }

  // One sendmmsg, non-blocking: the number of messages sent, or -errno when none was.
  int send(int fd);

 private:
  struct Message {
    const sockaddr_in* to;
    std::uint16_t segment_bytes;
    std::size_t first_iov, iov_count;
  };
  using Control = std::array<char, CMSG_SPACE(sizeof(std::uint16_t))>;
  void add_piece(std::span<const std::byte> piece);

  std::vector<Message> messages_;
  std::vector<iovec> iov_;
  std::vector<mmsghdr> headers_;
  std::vector<Control> controls_;
};

}  // namespace optireduce::udp
