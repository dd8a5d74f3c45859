#include "flow_window.hpp"

#include <algorithm>
#include <bit>

namespace optireduce::datagram {
namespace {

constexpr std::size_t kLinearLimit = 16384;    // larger datagrams go into page fragments
constexpr std::size_t kPacketHeadroom = 384;   // headers and alignment in a linear buffer
constexpr std::size_t kBufferBookkeeping = 256;
constexpr std::size_t kFragmentOverhead = 4096;
// The kernel returns the memory of datagrams already read to the socket in batches, up to a
// quarter of its buffer at a time: that much may still be charged when a pong says "read".
constexpr double kReleasedLate = 0.25;
// Share of the rest the senders may fill together: the remainder absorbs the pings and pongs
// and the datagrams of a peer already in the next call.
constexpr double kWindowShare = 0.9;

}  // namespace

std::size_t kernel_charge(std::size_t datagram_bytes) {
  if (datagram_bytes >= kLinearLimit) return datagram_bytes + kFragmentOverhead;
  return std::bit_ceil(datagram_bytes + kPacketHeadroom) + kBufferBookkeeping;
}

std::size_t receive_window_bytes(std::size_t granted_rcvbuf, std::size_t datagram_bytes, int ranks) {
  const double usable =
      (1 - kReleasedLate) * double(granted_rcvbuf) * double(datagram_bytes) / double(kernel_charge(datagram_bytes));
  const auto share = static_cast<std::size_t>(kWindowShare * usable / std::max(1, ranks - 1));
  return std::max(datagram_bytes, share);
}

std::optional<std::uint64_t> FlowWindow::ping_due(Clock::time_point now, std::size_t next_bytes) {
  const bool outstanding = ping_value_ > confirmed_;
  if (outstanding) {
    if (now - ping_at_ < kPingRetry) return std::nullopt;
  } else {
    const double step = kPingAt * double(window_);
    const bool regular = double(unconfirmed()) >= step && double(sent_ - ping_value_) >= step;
    if (sent_ == ping_value_ || !(regular || !open(next_bytes))) return std::nullopt;
  }
  ping_value_ = sent_;
  ping_at_ = now;
  return sent_;
}

void FlowWindow::withdraw(std::size_t bytes) {
  sent_ -= std::min<std::uint64_t>(bytes, sent_ - confirmed_);
  if (ping_value_ > sent_) ping_value_ = confirmed_;
}

void FlowWindow::confirm(std::uint64_t value) {
  if (value <= sent_) confirmed_ = std::max(confirmed_, value);
}

}  // namespace optireduce::datagram
