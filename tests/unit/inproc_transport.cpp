#include "inproc_transport.hpp"

#include <algorithm>
#include <cstring>
#include <thread>

namespace optireduce::testing {

InProcFabric::InProcFabric(int ranks) : ranks_(ranks), inboxes_(ranks), gather_slots_(ranks) {}

void InProcFabric::deliver(int to, Message m) {
  {
    std::lock_guard lock(mutex_);
    inboxes_[to].push_back(std::move(m));
  }
  arrived_.notify_all();
}

bool InProcFabric::take(int rank, Clock::time_point deadline, Message& out) {
  std::unique_lock lock(mutex_);
  if (!arrived_.wait_until(lock, deadline, [&] { return !inboxes_[rank].empty(); })) return false;
  out = std::move(inboxes_[rank].front());
  inboxes_[rank].pop_front();
  return true;
}

std::vector<std::vector<std::byte>> InProcFabric::allgather(int rank, std::span<const std::byte> mine) {
  std::unique_lock lock(mutex_);
  const unsigned generation = gather_generation_;
  gather_slots_[rank].assign(mine.begin(), mine.end());
  if (++gather_count_ == ranks_) {
    gather_result_ = gather_slots_;
    gather_count_ = 0;
    ++gather_generation_;
    arrived_.notify_all();
  } else {
    arrived_.wait(lock, [&] { return gather_generation_ != generation; });
  }
  return gather_result_;
}

std::shared_ptr<InProcFabric> InProcFabric::sub_fabric(std::uint64_t tag, int color, int ranks) {
  std::lock_guard lock(mutex_);
  auto& sub = subs_[{tag, color}];
  if (!sub) sub = std::make_shared<InProcFabric>(ranks);
  return sub;
}

bool InProcBootstrap::split(int color, int key, std::unique_ptr<Bootstrap>& out) {
  const int mine[2] = {color, key};
  const auto all = fabric_->allgather(rank_, std::as_bytes(std::span<const int>(mine)));
  const std::uint64_t tag = ++splits_;
  out.reset();
  if (color < 0) return true;
  std::vector<std::pair<int, int>> members;  // (key, rank)
  for (int r = 0; r < static_cast<int>(all.size()); ++r) {
    int theirs[2];
    std::memcpy(theirs, all[r].data(), sizeof theirs);
    if (theirs[0] == color) members.emplace_back(theirs[1], r);
  }
  std::sort(members.begin(), members.end());
  const auto me = std::find(members.begin(), members.end(), std::pair<int, int>(key, rank_)) - members.begin();
  out = std::make_unique<InProcBootstrap>(fabric_->sub_fabric(tag, color, static_cast<int>(members.size())), static_cast<int>(me));
  return true;
}

Status InProcTransport::send(int peer, Lane lane, std::span<const std::byte> header, std::span<const std::byte> payload) {
  if ((lane == Lane::data || drop_control_) && drop_ && drop_(rank_, peer, header)) return {};
  ++counters_.messages_sent;
  counters_.bytes_sent += header.size() + payload.size();
  InProcFabric::Message m{rank_, {header.begin(), header.end()}, {payload.begin(), payload.end()}};
  if (lane == Lane::data && acknowledge_) {
    m.wants_ack = true;
    ++unacked_[peer];
  }
  send_or_hold(peer, lane == Lane::data && hold_ ? hold_(rank_, peer, header) : Clock::duration::zero(), std::move(m));
  return {};
}

void InProcTransport::send_or_hold(int peer, Clock::duration hold, InProcFabric::Message m) {
  if (hold > Clock::duration::zero() || held_to(peer) != 0) {
    held_.push_back({peer, Clock::now() + hold, std::move(m)});
    return;
  }
  fabric_->deliver(peer, std::move(m));
}

std::size_t InProcTransport::held_to(int peer) const {
  return static_cast<std::size_t>(std::count_if(held_.begin(), held_.end(), [peer](const Held& h) { return h.peer == peer; }));
}

std::size_t InProcTransport::sends_in_flight(int peer) const {
  return held_to(peer) - acknowledgements_pending(peer) + unacked_[peer];
}

std::size_t InProcTransport::acknowledgements_pending(int peer) const {
  return static_cast<std::size_t>(
      std::count_if(held_.begin(), held_.end(), [peer](const Held& h) { return h.peer == peer && h.message.ack; }));
}

Clock::time_point InProcTransport::release_held() {
  const auto now = Clock::now();
  auto next = Clock::time_point::max();
  std::vector<int> blocked;  // peers whose first held message is not due: the rest waits behind it
  for (auto it = held_.begin(); it != held_.end();) {
    const bool behind = std::find(blocked.begin(), blocked.end(), it->peer) != blocked.end();
    if (behind || it->release > now) {
      if (!behind) {
        blocked.push_back(it->peer);
        next = std::min(next, it->release);
      }
      ++it;
      continue;
    }
    fabric_->deliver(it->peer, std::move(it->message));
    it = held_.erase(it);
  }
  return next;
}

Status InProcTransport::poll(Clock::time_point deadline, const std::function<void(const InboundMessage&)>& on_message) {
  // A held message leaves only while this rank polls: wake for the first one due, and count its
  // leaving as news, as a completed send is.
  maybe_stop({});
  const std::size_t held_before = held_.size();
  InProcFabric::Message m;
  for (;;) {
    const auto next_release = release_held();
    if (held_.size() != held_before) {
      if (!take(Clock::time_point::min(), m)) return {};
      break;
    }
    if (take(std::min(deadline, next_release), m)) break;
    if (next_release == Clock::time_point::max() || Clock::now() >= deadline) return Timeout("nothing arrived");
  }
  do {
    if (m.ack) {  // a send of this rank's completed: news, as a held message's leaving is
      --unacked_[m.source];
      continue;
    }
    hand_over(m, on_message);
    if (m.wants_ack) send_or_hold(m.source, acknowledge_(rank_, m.source, m.header), {rank_, {}, {}, false, true});
    maybe_stop(m.header);
  } while (take(Clock::time_point::min(), m));
  return {};
}

bool InProcTransport::take(Clock::time_point deadline, InProcFabric::Message& out) {
  if (Clock::now() < blind_until_) {
    std::this_thread::sleep_until(std::min(deadline, blind_until_));
    if (Clock::now() < blind_until_) return false;
  }
  return fabric_->take(rank_, deadline, out);
}

void InProcTransport::maybe_stop(std::span<const std::byte> header) {
  if (!stop_) return;
  const InProcNetwork::Stop stop = stop_(rank_, header);
  if (stop.stopped <= Clock::duration::zero()) return;
  std::this_thread::sleep_for(stop.stopped);
  blind_until_ = Clock::now() + stop.in_flight_after;
}

void hand_over(const InProcFabric::Message& m, const std::function<void(const InboundMessage&)>& on_message) {
  InboundMessage in;
  in.source = m.source;
  in.header = m.header;
  in.payload_size = m.payload.size();
  in.payload = m.payload;
  in.arrived = Clock::now();
  on_message(in);
}

bool AllgatherBootstrap::allreduce_sum(const float* input, float* output, std::uint64_t count) {
  const auto all = allgather({reinterpret_cast<const std::byte*>(input), count * sizeof(float)});
  for (const auto& blob : all)
    if (blob.size() != count * sizeof(float)) return false;
  for (std::uint64_t i = 0; i < count; ++i) {
    float sum = 0;
    for (const auto& blob : all) {
      float x;
      std::memcpy(&x, blob.data() + i * sizeof(float), sizeof x);
      sum += x;
    }
    output[i] = sum;
  }
  return true;
}

InProcJob start_inproc_job(int ranks, const EngineOptions& options, const InProcNetwork* bounded) {
  InProcJob job;
  job.fabric = std::make_shared<InProcFabric>(ranks);
  if (bounded) job.bounded_fabric = std::make_shared<InProcFabric>(ranks);
  job.engines.resize(ranks);
  std::vector<std::thread> threads;
  for (int r = 0; r < ranks; ++r)
    threads.emplace_back([&, r] {
      Status status;
      std::unique_ptr<Transport> lossy;
      if (bounded) lossy = std::make_unique<InProcTransport>(job.bounded_fabric, r, *bounded);
      auto exact = bounded && bounded->only_path ? std::move(lossy) : std::make_unique<InProcTransport>(job.fabric, r);
      job.engines[r] = Engine::create(r, ranks, std::move(exact), std::move(lossy),
                                      std::make_unique<InProcBootstrap>(job.fabric, r), options, status);
    });
  for (auto& t : threads) t.join();
  return job;
}

}  // namespace optireduce::testing
