// The datagram network a fault schedule describes, for ranks that are threads of one process:
// every message may be lost (by lane and direction), cut off by an outage of its direction,
// delivered twice, or held on the way (and so overtaken); a descheduled rank's thread stops in
// its transport calls. Each decision comes from the seed and the message's identity (sender,
// receiver, kind, call, offset, flags, and how many times that same message was sent before).
// Beside the communicator's own network (channel 0) it carries one channel per slice of a
// three-stage call (channel 1 + slice), among the slice's holders: each end of it is a rank of
// the job, whose faults (loss per direction, outages, descheduling) it takes.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <map>
#include <mutex>
#include <queue>
#include <tuple>
#include <vector>

#include "fault_schedule.hpp"
#include "../unit/inproc_transport.hpp"
#include "optireduce/transport.hpp"

namespace optireduce::schedules {

class ScheduledFabric {
 public:
  ScheduledFabric(const FaultSchedule& schedule, Clock::time_point job_start);
  const FaultSchedule& schedule() const { return schedule_; }
  double job_ms(Clock::time_point t) const { return std::chrono::duration<double, std::milli>(t - job_start_).count(); }
  Clock::time_point at_job_ms(double ms) const {
    return job_start_ + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double, std::milli>(ms));
  }

  struct Message {
    Clock::time_point release;
    std::uint64_t order;  // ties: in sending order
    testing::InProcFabric::Message message;
    bool operator>(const Message& o) const { return std::tie(release, order) > std::tie(o.release, o.order); }
  };
  // One end of a channel: its number among the channel's members, and the job's rank there.
  struct End {
    int member = 0, rank = 0;
  };
  // Sends one message of `channel` the way the schedule says (lost, held, doubled).
  void send(int channel, End from, End to, Lane lane, std::span<const std::byte> header, std::span<const std::byte> payload);
  // The next message of `channel` due for `member` by `deadline`.
  bool take(int channel, int member, Clock::time_point deadline, Message& out);
  // Until when `rank` is descheduled at `now` (now: it runs).
  Clock::time_point stopped_until(int rank, Clock::time_point now) const;
  // A descheduled rank's thread stops here (in its transport calls) until its time comes back.
  void run_or_stop(int rank) const;

  struct Counts {
    std::uint64_t sent = 0, lost = 0, cut = 0, doubled = 0, held = 0;
  };
  Counts counts();

 private:
  // A number in [0, 1) for this decision about this message.
  double draw(std::uint64_t identity, std::uint64_t salt) const;

  const FaultSchedule schedule_;
  const Clock::time_point job_start_;
  std::mutex mutex_;
  std::condition_variable arrived_;
  std::map<std::pair<int, int>, std::priority_queue<Message, std::vector<Message>, std::greater<>>> inboxes_;  // (channel, member)
  std::map<std::uint64_t, std::uint32_t> sent_before_;  // by message identity
  std::uint64_t order_ = 0;
  Counts counts_;
};

// One rank's end of the scheduled network: a transport that may lose data, as UDP is. Over the
// communicator's channel its members are the job's ranks; over a slice's, `members` names the
// job's rank of each member.
class ScheduledTransport final : public Transport {
 public:
  ScheduledTransport(std::shared_ptr<ScheduledFabric> fabric, int rank) : fabric_(std::move(fabric)), member_(rank) {}
  ScheduledTransport(std::shared_ptr<ScheduledFabric> fabric, int channel, int member, std::vector<int> members)
      : fabric_(std::move(fabric)), channel_(channel), member_(member), members_(std::move(members)) {}
  std::vector<std::byte> local_address() const override { return {std::byte(member_)}; }
  Status connect(int, const std::vector<std::vector<std::byte>>&, Clock::time_point) override { return {}; }
  Status send(int peer, Lane lane, std::span<const std::byte> header, std::span<const std::byte> payload) override;
  std::size_t sends_in_flight(int) const override { return 0; }  // a send is a copy
  bool abandon_queued_sends() override { return true; }
  Status poll(Clock::time_point deadline, const std::function<void(const InboundMessage&)>& on_message) override;
  TransportTraits traits() const override { return {false, false, true, 1024, false}; }
  std::string describe() const override { return "scheduled datagrams"; }

 private:
  int rank_of(int member) const { return members_.empty() ? member : members_[static_cast<std::size_t>(member)]; }
  std::shared_ptr<ScheduledFabric> fabric_;
  int channel_ = 0;
  int member_;
  std::vector<int> members_;
};

// The exact path of a rank under the same schedule: reliable, but its thread stops as the
// rank's bounded transport does when the schedule deschedules the rank.
class DescheduledTransport final : public Transport {
 public:
  DescheduledTransport(std::unique_ptr<Transport> inner, std::shared_ptr<ScheduledFabric> fabric, int rank)
      : inner_(std::move(inner)), fabric_(std::move(fabric)), rank_(rank) {}
  std::vector<std::byte> local_address() const override { return inner_->local_address(); }
  Status connect(int self, const std::vector<std::vector<std::byte>>& addresses, Clock::time_point deadline) override {
    return inner_->connect(self, addresses, deadline);
  }
  Status send(int peer, Lane lane, std::span<const std::byte> header, std::span<const std::byte> payload) override {
    fabric_->run_or_stop(rank_);
    return inner_->send(peer, lane, header, payload);
  }
  std::size_t sends_in_flight(int peer) const override { return inner_->sends_in_flight(peer); }
  bool abandon_queued_sends() override { return inner_->abandon_queued_sends(); }
  Status poll(Clock::time_point deadline, const std::function<void(const InboundMessage&)>& on_message) override {
    fabric_->run_or_stop(rank_);
    return inner_->poll(deadline, on_message);
  }
  TransportTraits traits() const override { return inner_->traits(); }
  std::string describe() const override { return inner_->describe(); }

 private:
  std::unique_ptr<Transport> inner_;
  std::shared_ptr<ScheduledFabric> fabric_;
  int rank_;
};

}  // namespace optireduce::schedules
