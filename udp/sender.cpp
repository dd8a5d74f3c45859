#include "sender.hpp"

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "optireduce/log.hpp"
#include "path.hpp"
#include "segmentation.hpp"

namespace optireduce::udp {
namespace {

constexpr std::size_t kMaxMessages = 32;      // messages per sendmmsg
constexpr int kMaxBatchesPerFlush = 64;       // bounds the time one flush() takes
constexpr auto kNoBufferBackoff = std::chrono::microseconds(50);

}  // namespace

Sender::Sender(int fd, std::vector<sockaddr_in> destinations, bool gso, datagram::Sealer& sealer,
               std::vector<datagram::FlowWindow>& windows, datagram::TokenBucket& bucket, TransportCounters& counters)
    : fd_(fd), destinations_(std::move(destinations)), gso_(gso), sealer_(sealer), windows_(windows), bucket_(bucket),
      counters_(counters), data_(destinations_.size()), queued_bytes_(destinations_.size(), 0),
      taken_(destinations_.size(), 0) {}

void Sender::queue_data(Outgoing datagram) {
  const auto p = static_cast<std::size_t>(datagram.peer);
  queued_bytes_[p] += datagram.bytes();
  data_[p].push_back(std::move(datagram));
}

void Sender::pop_data(std::size_t peer, std::size_t count) {
  for (std::size_t k = 0; k < count; ++k) {
    queued_bytes_[peer] -= data_[peer].front().bytes();
    data_[peer].pop_front();
  }
}

void Sender::send_control(std::vector<Outgoing> datagrams) {
  for (auto& d : datagrams) control_.push_back(std::move(d));
  flush_control(Clock::now());
}

void Sender::flush() {
  const auto now = Clock::now();
  if (now < retry_at_) return;
  blocked_ = false;
  if (!flush_control(now)) return;
  for (int round = 0; round < kMaxBatchesPerFlush; ++round) {
    build_data_batch(now);
    if (items_.empty()) return;
    const Result r = transmit(now);
    commit(r);
    if (blocked_ || now < retry_at_) return;
  }
}

// True when nothing of the control queue is left.
bool Sender::flush_control(Clock::time_point now) {
  while (!control_.empty()) {
    batch_.clear();
    const std::size_t n = std::min(control_.size(), kMaxMessages);
    for (std::size_t i = 0; i < n; ++i) {
      batch_.begin(&destinations_[static_cast<std::size_t>(control_[i].peer)], 0);
      batch_.add(control_[i]);
    }
    const Result r = transmit(now);
    for (std::size_t i = 0; i < r.sent; ++i) {
      ++counters_.messages_sent;
      counters_.bytes_sent += control_.front().bytes();
      control_.pop_front();
    }
    if (r.dropped_first) {
      ++counters_.send_errors;
      control_.pop_front();
    }
    if (r.sent == 0 && !r.dropped_first) return false;
  }
  return true;
}

void Sender::build_data_batch(Clock::time_point now) {
  items_.clear();
  pings_.clear();
  batch_.clear();
  std::fill(taken_.begin(), taken_.end(), 0);
  const int ranks = static_cast<int>(data_.size());
  const int start = next_peer_;
  bool progress = true;
  while (progress && items_.size() < kMaxMessages) {
    progress = false;
    for (int k = 0; k < ranks && items_.size() < kMaxMessages; ++k) {
      const int p = (start + k) % ranks;
      const Step s = add_run(p, now);
      if (s == Step::bucket_empty) return;
      if (s == Step::added) {
        progress = true;
        next_peer_ = (p + 1) % ranks;  // the next batch starts after the last peer served
      }
    }
  }
}

Sender::Step Sender::add_run(int peer, Clock::time_point now) {
  const auto p = static_cast<std::size_t>(peer);
  auto& queue = data_[p];
  const std::size_t start = taken_[p];
  if (start == queue.size()) return Step::none;
  auto& window = windows_[p];
  const std::size_t first = queue[start].bytes();
  if (!window.open(first)) {
    add_ping_if_due(peer, first, now);
    return Step::none;
  }
  const std::size_t budget =
      window.unconfirmed() == 0 ? std::max(window.window_bytes(), first) : window.window_bytes() - window.unconfirmed();
  auto size_at = [&](std::size_t i) { return queue[start + i].bytes(); };
  const std::size_t count = gso_ ? gso_run_length(queue.size() - start, size_at, std::min(budget, kMaxUdpPayload)) : 1;
  std::size_t bytes = 0;
  for (std::size_t i = 0; i < count; ++i) bytes += size_at(i);
  if (!bucket_.try_take(static_cast<double>(bytes), now)) return Step::bucket_empty;
  window.sent(bytes);
  batch_.begin(&destinations_[p], count > 1 ? static_cast<std::uint16_t>(first) : 0);
  for (std::size_t i = 0; i < count; ++i) batch_.add(queue[start + i]);
  items_.push_back({peer, count, bytes});
  taken_[p] += count;
  add_ping_if_due(peer, taken_[p] < queue.size() ? queue[taken_[p]].bytes() : 0, now);
  return Step::added;
}

void Sender::add_ping_if_due(int peer, std::size_t next_bytes, Clock::time_point now) {
  const auto value = windows_[static_cast<std::size_t>(peer)].ping_due(now, next_bytes);
  if (!value) return;
  const auto body = datagram::encode_value(*value);
  pings_.push_back(Outgoing::copied(peer, sealer_.seal(peer, datagram::Kind::ping, {}, body), {}, body));
  batch_.begin(&destinations_[static_cast<std::size_t>(peer)], 0);
  batch_.add(pings_.back());
  items_.push_back({peer, 0, pings_.back().bytes()});
}

Sender::Result Sender::transmit(Clock::time_point now) {
  ++counters_.send_calls;
  const int r = batch_.send(fd_);
  if (r > 0) return {static_cast<std::size_t>(r), false};
  const int error = -r;
  if (error == EAGAIN || error == EWOULDBLOCK) {
    blocked_ = true;
    return {};
  }
  if (error == ENOBUFS || error == EINTR) {
    retry_at_ = now + kNoBufferBackoff;
    return {};
  }
  if ((error == EIO || error == EINVAL) && gso_ && batch_.segmented(0)) {
    gso_ = false;  // the batch is built again without segmentation
    OR_LOG(info, "udp: the kernel refused UDP segmentation offload (%s); sending datagrams one by one",
           std::strerror(error));
    return {};
  }
  // The first message's own failure (too large for the route, refused by a filter): dropped,
  // never retried.
  OR_LOG(debug, "udp: sendmmsg: %s", std::strerror(error));
  return {0, true};
}

void Sender::commit(const Result& result) {
  for (std::size_t i = 0; i < items_.size(); ++i) {
    const Item& it = items_[i];
    const auto p = static_cast<std::size_t>(it.peer);
    const bool left = i < result.sent;
    const bool dropped = i == 0 && result.dropped_first;
    if (left || dropped) pop_data(p, it.count);
    if (left) {
      counters_.messages_sent += std::max<std::size_t>(it.count, 1);
      counters_.bytes_sent += it.bytes;
      continue;
    }
    if (dropped) counters_.send_errors += std::max<std::size_t>(it.count, 1);
    if (it.count == 0) continue;  // an unsent ping is asked again when due
    windows_[p].withdraw(it.bytes);
    bucket_.refund(static_cast<double>(it.bytes));
  }
}

std::size_t Sender::abandon_data() {
  std::size_t dropped = 0;
  for (auto& q : data_) {
    dropped += q.size();
    q.clear();
  }
  std::fill(queued_bytes_.begin(), queued_bytes_.end(), 0);
  counters_.abandoned_sends += dropped;
  return dropped;
}

Clock::time_point Sender::next_attempt(Clock::time_point now) {
  if (blocked_) return Clock::time_point::max();
  if (now < retry_at_) return retry_at_;
  if (!control_.empty()) return now;
  auto at = Clock::time_point::max();
  for (std::size_t p = 0; p < data_.size(); ++p) {
    if (data_[p].empty()) continue;
    const std::size_t bytes = data_[p].front().bytes();
    at = std::min(at, windows_[p].open(bytes) ? bucket_.ready_at(static_cast<double>(bytes), now) : windows_[p].retry_at());
  }
  return at;
}

}  // namespace optireduce::udp
