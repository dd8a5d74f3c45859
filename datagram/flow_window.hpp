// Flow control without retransmission: a sender keeps at most a window of bytes to a peer that
// the peer has not yet confirmed reading, so a peer that is not reading (still in an earlier call,
// descheduled) cannot have its socket buffer overrun. Confirmation: a ping carries the bytes sent
// so far; the peer answers with a pong once it has read the ping, which it reads after everything
// sent before it. A lost ping or pong only delays (the ping is repeated), never blocks.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <optional>

namespace optireduce::datagram {

// What the kernel charges a socket's receive buffer for one datagram of `datagram_bytes` without
// receive offload: a linear buffer rounded up to a power of two with room for the packet headers
// plus the buffer's bookkeeping; a large datagram lands in page fragments instead.
std::size_t kernel_charge(std::size_t datagram_bytes);

// The window of one sender at one receiver: a share of what the receiver's socket buffer holds in
// datagrams of this size (less what the kernel may still charge for datagrams already read),
// divided among the other ranks. `granted_rcvbuf` is what getsockopt
// reports (the kernel's real limit: twice what was asked).
std::size_t receive_window_bytes(std::size_t granted_rcvbuf, std::size_t datagram_bytes, int ranks);

class FlowWindow {
 public:
  using Clock = std::chrono::steady_clock;
  static constexpr auto kPingRetry = std::chrono::milliseconds(1);

  explicit FlowWindow(std::size_t window_bytes = 0) : window_(window_bytes) {}

  std::size_t window_bytes() const { return window_; }
  std::uint64_t unconfirmed() const { return sent_ - confirmed_; }
  // Whether `bytes` more may go now (one datagram always may when nothing is unconfirmed).
  bool open(std::size_t bytes) const { return unconfirmed() == 0 || unconfirmed() + bytes <= window_; }
  void sent(std::size_t bytes) { sent_ += bytes; }
  // Takes back bytes counted by sent() that did not leave after all; a ping that counted them is
  // forgotten (the next one is due at once if the window needs it).
  void withdraw(std::size_t bytes);

  // The value of a ping to send now, if one is due: every kPingAt of the window sent (so the
  // pong is back before the window closes), when `next_bytes` no longer fit, and again after
  // kPingRetry while one is unanswered.
  std::optional<std::uint64_t> ping_due(Clock::time_point now, std::size_t next_bytes);
  // A pong: everything up to `value` was read. Values beyond what was sent are ignored.
  void confirm(std::uint64_t value);
  // When a closed window asks again.
  Clock::time_point retry_at() const { return ping_at_ + kPingRetry; }

 private:
  static constexpr double kPingAt = 0.4;
  std::size_t window_;
  std::uint64_t sent_ = 0, confirmed_ = 0, ping_value_ = 0;
  Clock::time_point ping_at_{};
};

}  // namespace optireduce::datagram
