// The send side of the UDP transport. Data waits in a queue per peer (referencing the engine's
// memory) until that peer's flow window and the pacing bucket let it go; runs of datagrams to
// one peer leave in one GSO message where the kernel offers segmentation, and several messages
// in one sendmmsg. Control datagrams never wait behind data: they are sent at once, and only
// what the socket has no room for waits, ahead of all data. Nothing is ever retransmitted.
#pragma once

#include <netinet/in.h>

#include <chrono>
#include <cstddef>
#include <deque>
#include <vector>

#include "message_batch.hpp"
#include "optireduce/datagram/flow_window.hpp"
#include "optireduce/datagram/sealer.hpp"
#include "optireduce/datagram/token_bucket.hpp"
#include "optireduce/transport.hpp"
#include "outgoing.hpp"

namespace optireduce::udp {

class Sender {
 public:
  Sender(int fd, std::vector<sockaddr_in> destinations, bool gso, datagram::Sealer& sealer,
         std::vector<datagram::FlowWindow>& windows, datagram::TokenBucket& bucket, TransportCounters& counters);

  void queue_data(Outgoing datagram);
  void send_control(std::vector<Outgoing> datagrams);
  // Sends what the windows and the bucket allow now.
  void flush();

  std::size_t queued(int peer) const { return data_[static_cast<std::size_t>(peer)].size(); }
  std::size_t queued_bytes(int peer) const { return queued_bytes_[static_cast<std::size_t>(peer)]; }
  // Drops every queued data datagram; returns how many.
  std::size_t abandon_data();
  // When flush() can next make progress without a datagram arriving (time_point::max() when
  // only room in the socket can help: wait for it to become writable).
  Clock::time_point next_attempt(Clock::time_point now);
  bool waiting_for_room() const { return blocked_; }
  bool gso() const { return gso_; }

 private:
  struct Item {
    int peer;
    std::size_t count;  // queued datagrams it carries (0: a ping)
    std::size_t bytes;
  };
  struct Result {
    std::size_t sent = 0;
    bool dropped_first = false;  // the first message failed for good
  };
  enum class Step { none, added, bucket_empty };

  bool flush_control(Clock::time_point now);
  void build_data_batch(Clock::time_point now);
  Step add_run(int peer, Clock::time_point now);
  void add_ping_if_due(int peer, std::size_t next_bytes, Clock::time_point now);
  Result transmit(Clock::time_point now);
  void commit(const Result& result);
  void pop_data(std::size_t peer, std::size_t count);

  int fd_;
  std::vector<sockaddr_in> destinations_;
  bool gso_;
  datagram::Sealer& sealer_;
  std::vector<datagram::FlowWindow>& windows_;
  datagram::TokenBucket& bucket_;
  TransportCounters& counters_;

  std::vector<std::deque<Outgoing>> data_;
  std::vector<std::size_t> queued_bytes_;
  std::deque<Outgoing> control_;
  // The batch being built: per peer the queued datagrams in it, its messages, its pings.
  std::vector<std::size_t> taken_;
  std::vector<Item> items_;
  std::deque<Outgoing> pings_;
  MessageBatch batch_;
  int next_peer_ = 0;
  bool blocked_ = false;          // the socket had no room: wait until it is writable
  Clock::time_point retry_at_{};  // the kernel had no buffers: try again then
};

}  // namespace optireduce::udp
