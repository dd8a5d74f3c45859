#include "scheduled_network.hpp"

#include <thread>

#include "optireduce/engine/tar/wire_header.hpp"

namespace optireduce::schedules {

namespace {
std::uint64_t mix(std::uint64_t x) {
  x ^= x >> 30;
  x *= 0xbf58476d1ce4e5b9ull;
  x ^= x >> 27;
  x *= 0x94d049bb133111ebull;
  x ^= x >> 31;
  return x;
}
}  // namespace

ScheduledFabric::ScheduledFabric(const FaultSchedule& schedule, Clock::time_point job_start)
    : schedule_(schedule), job_start_(job_start) {}

double ScheduledFabric::draw(std::uint64_t identity, std::uint64_t salt) const {
  return double(mix(identity ^ mix(schedule_.seed + salt)) >> 11) / double(1ull << 53);
}

void ScheduledFabric::send(int channel, End source, End dest, Lane lane, std::span<const std::byte> header,
                           std::span<const std::byte> payload) {
  const auto now = Clock::now();
  const int from = source.rank, to = dest.rank;
  WireHeader h;
  const bool ours = decode(header, h);
  std::uint64_t identity = mix((std::uint64_t(from) << 8 | std::uint64_t(to)) ^ std::uint64_t(lane) << 16);
  if (ours)
    identity = mix(identity ^ mix(std::uint64_t(h.kind) << 32 ^ h.flags) ^ mix(h.epoch * 0x9e3779b97f4a7c15ull + h.offset));
  if (channel != 0) identity = mix(identity ^ mix(0xa0761d6478bd642full * std::uint64_t(channel)));  // the communicator's as before
  std::lock_guard lock(mutex_);
  identity = mix(identity + sent_before_[identity]++);
  ++counts_.sent;
  const double t = job_ms(now);
  for (const auto& o : schedule_.outages)
    if (o.from == from && o.to == to && t >= o.start_ms && t < o.start_ms + o.length_ms && !(o.control_only && lane == Lane::data)) {
      ++counts_.cut;
      return;
    }
  const auto d = static_cast<std::size_t>(from * schedule_.ranks + to);
  if (draw(identity, 1) < (lane == Lane::data ? schedule_.data_loss[d] : schedule_.control_loss[d])) {
    ++counts_.lost;
    return;
  }
  const int copies = draw(identity, 2) < schedule_.duplicate ? 2 : 1;
  counts_.doubled += copies - 1;
  for (int k = 0; k < copies; ++k) {
    auto release = now;
    if (draw(identity, 3 + k) < schedule_.delayed) {
      ++counts_.held;
      release += std::chrono::duration_cast<Clock::duration>(
          std::chrono::duration<double, std::milli>(draw(identity, 5 + k) * schedule_.max_delay_ms));
    }
    inboxes_[{channel, dest.member}].push(
        {release, order_++, {source.member, {header.begin(), header.end()}, {payload.begin(), payload.end()}}});
  }
  arrived_.notify_all();
}

bool ScheduledFabric::take(int channel, int member, Clock::time_point deadline, Message& out) {
  std::unique_lock lock(mutex_);
  auto& inbox = inboxes_[{channel, member}];
  for (;;) {
    const auto now = Clock::now();
    if (!inbox.empty() && inbox.top().release <= now) break;
    if (now >= deadline) return false;
    const auto wake = inbox.empty() ? deadline : std::min(deadline, inbox.top().release);
    arrived_.wait_until(lock, wake);
  }
  out = inbox.top();
  inbox.pop();
  return true;
}

Clock::time_point ScheduledFabric::stopped_until(int rank, Clock::time_point now) const {
  const double t = job_ms(now);
  for (const auto& d : schedule_.deschedules)
    if ((d.rank == rank || d.rank == kEveryRank) && t >= d.start_ms && t < d.start_ms + d.length_ms) return at_job_ms(d.start_ms + d.length_ms);
  return now;
}

ScheduledFabric::Counts ScheduledFabric::counts() {
  std::lock_guard lock(mutex_);
  return counts_;
}

void ScheduledFabric::run_or_stop(int rank) const {
  for (auto now = Clock::now(), until = stopped_until(rank, now); until > now; now = Clock::now(), until = stopped_until(rank, now))
    std::this_thread::sleep_until(until);
}

Status ScheduledTransport::send(int peer, Lane lane, std::span<const std::byte> header, std::span<const std::byte> payload) {
  fabric_->run_or_stop(rank_of(member_));
  fabric_->send(channel_, {member_, rank_of(member_)}, {peer, rank_of(peer)}, lane, header, payload);
  return {};
}

Status ScheduledTransport::poll(Clock::time_point deadline, const std::function<void(const InboundMessage&)>& on_message) {
  fabric_->run_or_stop(rank_of(member_));
  ScheduledFabric::Message m;
  if (!fabric_->take(channel_, member_, deadline, m)) return Timeout("nothing arrived");
  do testing::hand_over(m.message, on_message);
  while (fabric_->take(channel_, member_, Clock::time_point::min(), m));
  return {};
}

}  // namespace optireduce::schedules
