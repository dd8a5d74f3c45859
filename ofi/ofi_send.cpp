// OfiTransport's send side: data waits per peer for its flow window and the pacing bucket;
// control datagrams (hello, ping, pong, the engine's control lane) go first, outside both.
#include <rdma/fi_endpoint.h>
#include <rdma/fi_errno.h>
#include <sys/uio.h>

#include <cstring>

#include "ofi_transport.hpp"
#include "optireduce/log.hpp"

namespace optireduce::ofi {
namespace {

constexpr auto kSendBufferBackoff = std::chrono::microseconds(50);

}  // namespace

OfiTransport::TxEntry* OfiTransport::new_entry() {
  if (free_entries_.empty()) {
    entries_.push_back(std::make_unique<TxEntry>());
    return entries_.back().get();
  }
  TxEntry* e = free_entries_.back();
  free_entries_.pop_back();
  return e;
}

void OfiTransport::queue_datagram(int peer, datagram::Kind kind, std::span<const std::byte> header,
                                  std::span<const std::byte> payload, bool by_reference, bool control) {
  TxEntry* e = new_entry();
  e->peer = peer;
  e->engine_send = by_reference;
  e->sequence = sealer_.next_sequence(peer);
  const datagram::HeaderBytes sealed = sealer_.seal(peer, kind, header, payload);
  e->head.resize(prefix_ + sealed.size() + header.size() + (by_reference ? 0 : payload.size()));
  std::byte* at = std::copy(sealed.begin(), sealed.end(), e->head.data() + prefix_);
  at = std::copy(header.begin(), header.end(), at);
  if (!by_reference) std::copy(payload.begin(), payload.end(), at);
  e->payload = by_reference ? payload : std::span<const std::byte>{};
  const auto p = static_cast<std::size_t>(peer);
  if (by_reference) ++in_flight_[p];
  if (control) {
    control_.push_back(e);
    return;
  }
  queues_[p].push_back(e);
  // Forward error correction: data datagrams feed the destination's parity group; a full group
  // sends its parity right behind it.
  if (kind != datagram::Kind::data || !settings_.fec_group) return;
  const std::span<const std::byte> pieces[] = {std::span<const std::byte>(e->head).subspan(prefix_), e->payload};
  encoders_[p].add(e->sequence, pieces);
  if (encoders_[p].full()) close_parity_group(peer);
}

void OfiTransport::close_parity_group(int peer) {
  std::vector<std::byte> table, parity;
  encoders_[static_cast<std::size_t>(peer)].finish(table, parity);
  ++counters_.fec_parity_sent;
  queue_datagram(peer, datagram::Kind::parity, table, parity, false, false);
}

void OfiTransport::reply(int peer, datagram::Kind kind, std::span<const std::byte> body) {
  queue_datagram(peer, kind, {}, body, false, true);
}

void OfiTransport::send_control(int peer, std::span<const std::byte> header, std::span<const std::byte> payload,
                                int copies) {
  for (int copy = 0; copy < copies; ++copy) queue_datagram(peer, datagram::Kind::data, header, payload, false, true);
  flush_sends();
}

void OfiTransport::queue_data(int peer, std::span<const std::byte> header, std::span<const std::byte> payload) {
  queue_datagram(peer, datagram::Kind::data, header, payload, !copy_payload_, false);
  flush_sends();
}

// Hands one datagram to the provider: sent, failed for good (counted, never retried), or busy
// (no room now).
OfiTransport::Posted OfiTransport::post(TxEntry* e) {
  iovec iov[2] = {{e->head.data(), e->head.size()}, {const_cast<std::byte*>(e->payload.data()), e->payload.size()}};
  fi_msg msg{};
  msg.msg_iov = iov;
  msg.iov_count = e->payload.empty() ? 1 : 2;
  msg.addr = addresses_[static_cast<std::size_t>(e->peer)];
  msg.context = &e->context;
  ++counters_.send_calls;
  ssize_t rc = fi_sendmsg(endpoint_->ep, &msg, 0);
  if (rc == -FI_EAGAIN) {
    reap_sends();
    ++counters_.send_calls;
    rc = fi_sendmsg(endpoint_->ep, &msg, 0);
  }
  if (rc == -FI_EAGAIN) {  // the socket's send buffer is full: try again shortly
    send_blocked_until_ = Clock::now() + kSendBufferBackoff;
    return Posted::busy;
  }
  if (rc) {
    ++counters_.send_errors;
    release(e);
    return Posted::failed;
  }
  e->posted = true;
  if (e->engine_send) ++posted_engine_sends_;
  ++counters_.messages_sent;
  counters_.bytes_sent += datagram_bytes(e);
  return Posted::sent;
}

void OfiTransport::release(TxEntry* e) {
  if (e->engine_send) --in_flight_[static_cast<std::size_t>(e->peer)];
  if (e->engine_send && e->posted) --posted_engine_sends_;
  e->posted = false;
  free_entries_.push_back(e);
}

bool OfiTransport::flush_control() {
  while (!control_.empty()) {
    if (post(control_.front()) == Posted::busy) return false;
    control_.pop_front();
  }
  return true;
}

void OfiTransport::queue_ping_if_due(int peer, std::size_t next_bytes, Clock::time_point now) {
  if (const auto value = windows_[static_cast<std::size_t>(peer)].ping_due(now, next_bytes))
    reply(peer, datagram::Kind::ping, datagram::encode_value(*value));
}

// Round robin over the peers with data queued: the first whose window is open; pings are
// queued for those whose window is closed.
int OfiTransport::next_ready_peer(Clock::time_point now) {
  for (int k = 0; k < ranks_; ++k) {
    const int p = (next_peer_ + k) % ranks_;
    const auto& q = queues_[static_cast<std::size_t>(p)];
    if (q.empty()) continue;
    const std::size_t bytes = datagram_bytes(q.front());
    if (windows_[static_cast<std::size_t>(p)].open(bytes)) return p;
    queue_ping_if_due(p, bytes, now);
  }
  return -1;
}

void OfiTransport::flush_sends() {
  reap_sends();
  const auto now = Clock::now();
  if (now < send_blocked_until_ || !flush_control()) return;
  for (;;) {
    const int p = next_ready_peer(now);
    if (!flush_control() || p < 0) return;
    auto& q = queues_[static_cast<std::size_t>(p)];
    TxEntry* e = q.front();
    const std::size_t bytes = datagram_bytes(e);
    if (!bucket_.try_take(static_cast<double>(bytes), Clock::now())) return;
    const Posted result = post(e);
    if (result == Posted::busy) {
      bucket_.refund(static_cast<double>(bytes));
      return;
    }
    q.pop_front();
    next_peer_ = (p + 1) % ranks_;
    if (result == Posted::sent) windows_[static_cast<std::size_t>(p)].sent(bytes);
    queue_ping_if_due(p, q.empty() ? 0 : datagram_bytes(q.front()), now);
    // A parity group left open when the queue to its peer runs dry is closed now, so the tail
    // of a burst is protected too.
    if (settings_.fec_group && q.empty() && encoders_[static_cast<std::size_t>(p)].open()) close_parity_group(p);
  }
}

bool OfiTransport::drop_queued_data() {
  reap_sends();
  for (auto& q : queues_) {
    for (TxEntry* e : q) {
      ++counters_.abandoned_sends;
      release(e);
    }
    q.clear();
  }
  // Sends posted but not completed may still read engine memory (providers that do not copy).
  return posted_engine_sends_ == 0;
}

void OfiTransport::reap_sends() {
  fi_cq_msg_entry done[64];
  for (;;) {
    const ssize_t n = fi_cq_read(endpoint_->tx_cq, done, 64);
    if (n == -FI_EAVAIL) {
      fi_cq_err_entry err{};
      // An error entry that cannot be read would be reported again and again: stop here.
      if (fi_cq_readerr(endpoint_->tx_cq, &err, 0) != 1) return;
      if (err.op_context) {
        ++counters_.send_errors;
        release(reinterpret_cast<TxEntry*>(err.op_context));
      }
      continue;
    }
    if (n <= 0) return;
    for (ssize_t i = 0; i < n; ++i) release(reinterpret_cast<TxEntry*>(done[i].op_context));
  }
}

}  // namespace optireduce::ofi
