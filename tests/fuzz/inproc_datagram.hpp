// Two ranks of one process joined by an in-process "wire" of datagrams, for the engine half of the
// fuzz harness: each rank's transport seals what its engine sends with the real sealer, and takes
// what arrives through udp's real receive path (GRO split, source address to rank), datagram/'s
// one dispatch and its inbound handler, exactly as UdpTransport does. Rank 0 also takes the
// fuzzer's datagrams, one before each batch of honest ones. A bootstrap over the same process
// lets each rank's engine start and agree; once a rank has left (its calls are over) a rendezvous
// gives up at once instead of waiting for it.
#pragma once

#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <vector>

#include <netinet/in.h>

#include "optireduce/datagram/inbound_handler.hpp"
#include "optireduce/datagram/sealer.hpp"
#include "optireduce/engine/engine/bootstrap.hpp"
#include "optireduce/engine/tar/wire_header.hpp"
#include "optireduce/transport.hpp"
#include "optireduce/udp/receive_path.hpp"

namespace optireduce::fuzz {

inline constexpr int kEngineRanks = 2;
// Addresses: rank 0, rank 1, a stranger.
sockaddr_in loop_address(int index);

// One buffer as a receive path gets it.
struct LoopBuffer {
  std::vector<std::byte> bytes;
  std::size_t segment = 0;
  bool truncated = false;
  int from = 0;  // index for loop_address
};

// What both ranks share: the wire, the rendezvous, and what honest rank 1 sent.
class Loop {
 public:
  void post(int to, LoopBuffer buffer);
  // The buffers waiting for `rank`; waits until there are some or `deadline`.
  std::deque<LoopBuffer> take(int rank, Clock::time_point deadline);
  // Collective over both ranks; blobs of a rank that has left come back empty.
  std::vector<std::vector<std::byte>> allgather(int rank, std::span<const std::byte> mine);
  void leave(int rank);

  void note_honest(std::span<const std::byte> header, std::span<const std::byte> payload);
  bool honest(std::span<const std::byte> header, std::span<const std::byte> payload) const;

 private:
  mutable std::mutex mutex_;
  std::condition_variable changed_;
  std::deque<LoopBuffer> inbox_[kEngineRanks];
  bool left_[kEngineRanks] = {false, false};
  std::vector<std::byte> slots_[kEngineRanks];
  bool filled_[kEngineRanks] = {false, false};
  unsigned generation_ = 0;
  std::vector<std::vector<std::byte>> result_;
  std::set<std::vector<std::byte>> honest_;
};

struct LoopSettings {
  bool authenticate = true;
  bool bounded = false;  // exact calls run over the transport (it says it is reliable) unless set
  std::size_t max_datagram = 65507;
};

class LoopTransport final : public Transport, private datagram::ControlReplies {
 public:
  LoopTransport(std::shared_ptr<Loop> loop, int rank, const LoopSettings& settings, datagram::Authenticator* auth);

  // Rank 0: the fuzzer's buffers, asked for (and handed to the receive path) one per poll step.
  void inject(std::function<std::optional<LoopBuffer>()> next) { next_injected_ = std::move(next); }
  // Rank 0: the last engine header this rank sent (the call in progress), for the fuzzer's
  // templates; false before the first.
  bool last_sent(WireHeader& out) const;
  // Whether anything not sent by honest rank 1 reached the engine.
  bool foreign_delivered() const { return foreign_delivered_; }
  const TransportCounters& datagram_counters() const { return counters_; }

  std::vector<std::byte> local_address() const override { return {std::byte(rank_)}; }
  Status connect(int, const std::vector<std::vector<std::byte>>&, Clock::time_point) override { return {}; }
  Status send(int peer, Lane lane, std::span<const std::byte> header, std::span<const std::byte> payload) override;
  std::size_t sends_in_flight(int) const override { return 0; }
  bool abandon_queued_sends() override { return true; }
  Status poll(Clock::time_point deadline, const std::function<void(const InboundMessage&)>& on_message) override;
  TransportTraits traits() const override;
  std::string describe() const override { return "loop"; }
  TransportCounters counters() const override { return counters_; }

 private:
  void reply(int peer, datagram::Kind kind, std::span<const std::byte> body) override;
  void receive(const LoopBuffer& buffer);

  std::shared_ptr<Loop> loop_;
  const int rank_;
  const LoopSettings settings_;
  datagram::Sealer sealer_;
  datagram::Handshake handshake_;
  std::vector<datagram::FlowWindow> windows_;
  TransportCounters counters_;
  datagram::ReceiveDispatch dispatch_;
  udp::ReceivePath path_;
  datagram::InboundHandler inbound_;
  std::function<std::optional<LoopBuffer>()> next_injected_;
  std::vector<std::byte> last_header_;
  bool foreign_delivered_ = false;
};

class LoopBootstrap final : public Bootstrap {
 public:
  LoopBootstrap(std::shared_ptr<Loop> loop, int rank) : loop_(std::move(loop)), rank_(rank) {}
  std::vector<std::vector<std::byte>> allgather(std::span<const std::byte> mine) override {
    return loop_->allgather(rank_, mine);
  }
  // Exact, in rank order; false when the other rank has left.
  bool allreduce_sum(const float* input, float* output, std::uint64_t count) override;

 private:
  std::shared_ptr<Loop> loop_;
  int rank_;
};

}  // namespace optireduce::fuzz
