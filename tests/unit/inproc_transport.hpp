// Several ranks as threads of one process (as in Gloo's tests): an in-process transport and
// bootstrap, so the engine's logic is tested without MPI or a network.
#pragma once

#include <atomic>
#include <condition_variable>
#include <deque>
#include <cstring>
#include <functional>
#include <map>
#include <span>
#include <memory>
#include <mutex>
#include <vector>

#include "optireduce/engine/engine/bootstrap.hpp"
#include "optireduce/engine/engine/engine.hpp"
#include "optireduce/transport.hpp"

namespace optireduce::testing {

// What all ranks of one in-process job share.
class InProcFabric {
 public:
  explicit InProcFabric(int ranks);
  int ranks() const { return ranks_; }

  struct Message {
    int source;
    std::vector<std::byte> header;
    std::vector<std::byte> payload;
    bool wants_ack = false;  // its send stays in flight until the receiver acknowledges it
    bool ack = false;        // no message: the acknowledgement of one this rank sent to `source`
  };
  void deliver(int to, Message m);
  // Waits until a message for `rank` is there or the deadline passes.
  bool take(int rank, Clock::time_point deadline, Message& out);

  // All-gather among the ranks (a generation-counted rendezvous).
  std::vector<std::vector<std::byte>> allgather(int rank, std::span<const std::byte> mine);
  // The fabric of a group split from this one: the same object for every caller passing the same
  // tag and color (a split's number and color; a sub-engine's transports).
  std::shared_ptr<InProcFabric> sub_fabric(std::uint64_t tag, int color, int ranks);
  // How many all-gathers (and so bootstrap collectives of any kind) the ranks completed.
  unsigned collectives() {
    std::lock_guard lock(mutex_);
    return gather_generation_;
  }
  // How many all-gathers in two halves (Bootstrap::start_allgather) the ranks started, summed
  // over ranks.
  unsigned started_in_halves() const { return started_in_halves_.load(); }
  void note_started_in_halves() { ++started_in_halves_; }

 private:
  const int ranks_;
  std::mutex mutex_;
  std::condition_variable arrived_;
  std::vector<std::deque<Message>> inboxes_;
  std::vector<std::vector<std::byte>> gather_slots_;
  int gather_count_ = 0;
  unsigned gather_generation_ = 0;
  std::vector<std::vector<std::byte>> gather_result_;
  std::map<std::pair<std::uint64_t, int>, std::shared_ptr<InProcFabric>> subs_;
  std::atomic<unsigned> started_in_halves_{0};
};

// A network for the bounded calls beside the exact one: a transport that may lose messages
// (traits.reliable false), losing the data-lane messages `drop` picks (from, to, header), and the
// control-lane ones too where `drop_control` says so.
struct InProcNetwork {
  TransportTraits traits{false, false, false, std::size_t{1} << 30};
  std::function<bool(int from, int to, std::span<const std::byte> header)> drop;
  bool drop_control = false;
  // The network carries every call, exact and bounded (one transport, as UCX does).
  bool only_path = false;
  // How long a data-lane send waits in its sender's queue (zero: none). As in a shared-memory
  // FIFO, a queued message leaves only while its sender polls, and in order: later sends to the
  // same peer queue behind it, and sends_in_flight() counts them.
  std::function<Clock::duration(int from, int to, std::span<const std::byte> header)> hold;
  // Called on a rank's own thread as each of its polls begins (with an empty header) and for each
  // message its poll hands over: how long that thread then stops, as a descheduled or stopped
  // process does, and how long after it runs again nothing reaches it (what was sent to it
  // meanwhile is still on its way: through a shared-memory FIFO a message moves only while both
  // ends run).
  struct Stop {
    Clock::duration stopped{};
    Clock::duration in_flight_after{};
  };
  std::function<Stop(int to, std::span<const std::byte> header)> stop_receiver;
  // Set: a data-lane send stays in flight at its sender until its receiver acknowledges it, as a
  // UCX rendezvous send waits for the receiver's ATS. The acknowledgement leaves the receiver as
  // its own sends do (only while it polls, in order, behind what it holds for that sender, and
  // what it sends that sender later queues behind it), held there as long as this returns (from:
  // the receiver, to: the sender, the acknowledged message's header; zero: not held).
  std::function<Clock::duration(int from, int to, std::span<const std::byte> header)> acknowledge;
};

// Hands one message to the engine, as a transport's poll does (it arrived now).
void hand_over(const InProcFabric::Message& m, const std::function<void(const InboundMessage&)>& on_message);

class InProcTransport final : public Transport {
 public:
  InProcTransport(std::shared_ptr<InProcFabric> fabric, int rank)
      : fabric_(std::move(fabric)), rank_(rank), unacked_(fabric_->ranks(), 0) {}
  InProcTransport(std::shared_ptr<InProcFabric> fabric, int rank, const InProcNetwork& network)
      : fabric_(std::move(fabric)), rank_(rank), traits_(network.traits), drop_(network.drop), drop_control_(network.drop_control),
        hold_(network.hold), stop_(network.stop_receiver), acknowledge_(network.acknowledge), unacked_(fabric_->ranks(), 0) {}
  std::vector<std::byte> local_address() const override { return {std::byte(rank_)}; }
  Status connect(int, const std::vector<std::vector<std::byte>>&, Clock::time_point) override { return {}; }
  Status send(int peer, Lane lane, std::span<const std::byte> header, std::span<const std::byte> payload) override;
  std::size_t sends_in_flight(int peer) const override;  // held ones (a send is a copy), and unacknowledged ones
  std::size_t acknowledgements_pending(int peer) const override;  // held ones
  Status poll(Clock::time_point deadline, const std::function<void(const InboundMessage&)>& on_message) override;
  TransportTraits traits() const override { return traits_; }
  std::string describe() const override { return "inproc"; }
  // What this rank handed to the fabric or held for it (not what a drop discarded).
  TransportCounters counters() const override { return counters_; }

 private:
  std::shared_ptr<InProcFabric> fabric_;
  int rank_;
  struct Held {
    int peer;
    Clock::time_point release;
    InProcFabric::Message message;
  };
  // Sends held messages that are due, in order; when the next one falls due (max: none held).
  Clock::time_point release_held();
  // Held messages to `peer`, acknowledgements among them (later sends queue behind them).
  std::size_t held_to(int peer) const;
  // Queues `m` for `peer` behind what is held for it, or held `hold` itself; else sends it now.
  void send_or_hold(int peer, Clock::duration hold, InProcFabric::Message m);
  // The next message for this rank, by `deadline`: none while what was sent to it during a stop
  // is still on its way.
  bool take(Clock::time_point deadline, InProcFabric::Message& out);
  // As a poll begins (empty) or after a message is handed over: the stop stop_receiver asks for.
  void maybe_stop(std::span<const std::byte> header);

  TransportTraits traits_{true, true, true, std::size_t{1} << 30};
  std::function<bool(int, int, std::span<const std::byte>)> drop_;
  bool drop_control_ = false;
  std::function<Clock::duration(int, int, std::span<const std::byte>)> hold_;
  std::deque<Held> held_;  // used by the rank's own thread only
  TransportCounters counters_;  // likewise
  std::function<InProcNetwork::Stop(int, std::span<const std::byte>)> stop_;
  Clock::time_point blind_until_{};  // nothing reaches this rank before (after a stop)
  std::function<Clock::duration(int, int, std::span<const std::byte>)> acknowledge_;
  std::vector<std::size_t> unacked_;  // per peer: sends it has not acknowledged (this rank's thread)
};

// A bootstrap whose exact sum is summed in rank order over its own all-gather (false where a
// rank's part did not come whole).
class AllgatherBootstrap : public Bootstrap {
 public:
  bool allreduce_sum(const float* input, float* output, std::uint64_t count) override;
};

class InProcBootstrap final : public AllgatherBootstrap {
 public:
  InProcBootstrap(std::shared_ptr<InProcFabric> fabric, int rank) : fabric_(std::move(fabric)), rank_(rank) {}
  std::vector<std::vector<std::byte>> allgather(std::span<const std::byte> mine) override {
    return fabric_->allgather(rank_, mine);
  }
  void start_allgather(std::span<const std::byte> mine) override {
    fabric_->note_started_in_halves();
    Bootstrap::start_allgather(mine);
  }
  // Over the all-gather: the members of this rank's color, ordered by key then rank.
  bool split(int color, int key, std::unique_ptr<Bootstrap>& out) override;
  const std::shared_ptr<InProcFabric>& fabric() const { return fabric_; }

 private:
  std::shared_ptr<InProcFabric> fabric_;
  int rank_;
  std::uint64_t splits_ = 0;
};

// N engines over one in-process fabric, created concurrently (creation is collective). An entry
// is null when creation failed.
struct InProcJob {
  std::shared_ptr<InProcFabric> fabric;
  std::shared_ptr<InProcFabric> bounded_fabric;  // with a network for the bounded calls
  std::vector<std::unique_ptr<Engine>> engines;
  int ranks() const { return static_cast<int>(engines.size()); }
};
InProcJob start_inproc_job(int ranks, const EngineOptions& options, const InProcNetwork* bounded = nullptr);

}  // namespace optireduce::testing
