// OfiTransport's receive side: completions drained into the one dispatch of datagram/, blocking
// on the provider's wait object in between.
#include <poll.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_errno.h>

#include <algorithm>

#include "ofi_transport.hpp"
#include "optireduce/log.hpp"
#include "optireduce/poll_until.hpp"

namespace optireduce::ofi {
namespace {

constexpr std::size_t kMaxCompletionsPerPoll = 256;
constexpr auto kLongestWait = std::chrono::seconds(1);

}  // namespace

bool OfiTransport::post_receive(RxBuffer& buffer) {
  for (int attempt = 0; attempt < 2; ++attempt) {
    const ssize_t rc = fi_recv(endpoint_->ep, buffer.data.data(), buffer.data.size(), nullptr, FI_ADDR_UNSPEC, &buffer.context);
    if (rc == 0) return true;
    if (rc != -FI_EAGAIN) {
      OR_LOG(error, "ofi: fi_recv: %s", fi_strerror(static_cast<int>(-rc)));
      return false;
    }
  }
  return false;
}

std::optional<int> OfiTransport::origin_of(fi_addr_t from) const {
  if (!has_source_) return std::nullopt;  // the tag alone vouches for the source
  const auto it = rank_of_.find(from);
  return it == rank_of_.end() ? -1 : it->second;
}

void OfiTransport::drain_receives() {
  fi_cq_msg_entry done[16];
  fi_addr_t from[16];
  std::size_t handled = 0;
  while (handled < kMaxCompletionsPerPoll) {
    ++counters_.receive_calls;
    const ssize_t n = has_source_ ? fi_cq_readfrom(endpoint_->rx_cq, done, 16, from) : fi_cq_read(endpoint_->rx_cq, done, 16);
    if (n == -FI_EAVAIL) {
      fi_cq_err_entry err{};
      const bool read = fi_cq_readerr(endpoint_->rx_cq, &err, 0) == 1;
      if (read && err.op_context) post_receive(*reinterpret_cast<RxBuffer*>(err.op_context));
      ++counters_.rejected_malformed;
      ++handled;  // an error entry counts too: a CQ that keeps reporting one ends the loop
      if (!read) return;
      continue;
    }
    if (n <= 0) return;
    const auto arrived = Clock::now();
    for (ssize_t i = 0; i < n; ++i) {
      auto* buffer = reinterpret_cast<RxBuffer*>(done[i].op_context);
      const std::size_t length = std::min(done[i].len, buffer->data.size() - prefix_);
      const std::span<const std::byte> wire(buffer->data.data() + prefix_, length);
      dispatch_->dispatch({wire, origin_of(has_source_ ? from[i] : FI_ADDR_NOTAVAIL), arrived}, *inbound_, counters_);
      post_receive(*buffer);
    }
    handled += static_cast<std::size_t>(n);
  }
}

// Sends before and after reading: pongs and hellos just queued, windows just opened.
void OfiTransport::progress(bool /*readable*/) {
  flush_sends();
  drain_receives();
  flush_sends();
}

// Blocks on the provider's wait object; always true, since a provider's wait does not say what
// woke it.
bool OfiTransport::wait(Clock::time_point until) {
  const auto now = Clock::now();
  until = std::min(until, now + kLongestWait);
  if (!control_.empty()) until = std::min(until, std::max(now, send_blocked_until_));
  for (int p = 0; p < ranks_; ++p) {
    const auto& q = queues_[static_cast<std::size_t>(p)];
    if (q.empty()) continue;
    // The queue moves again when the bucket has the bytes and the socket room, or, for a peer
    // whose window is closed, when its confirmation comes (a datagram: wakes us) or is due again.
    const std::size_t bytes = datagram_bytes(q.front());
    const auto& w = windows_[static_cast<std::size_t>(p)];
    until = std::min(until, w.open(bytes) ? std::max(send_blocked_until_, bucket_.ready_at(static_cast<double>(bytes), now))
                                          : w.retry_at());
  }
  if (until <= now) return true;
  fid* fids[1] = {&endpoint_->rx_cq->fid};
  if (fi_trywait(endpoint_->fabric, fids, 1) != FI_SUCCESS) return true;  // something is ready already
  pollfd pfd{endpoint_->wait_fd, POLLIN, 0};
  poll_until(pfd, until);
  return true;
}

}  // namespace optireduce::ofi
