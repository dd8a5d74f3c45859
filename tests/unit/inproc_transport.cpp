#include "inproc_transport.hpp"

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

Status InProcTransport::send(int peer, Lane lane, std::span<const std::byte> header, std::span<const std::byte> payload) {
  if (lane == Lane::data && drop_ && drop_(rank_, peer, header)) return {};
  fabric_->deliver(peer, {rank_, {header.begin(), header.end()}, {payload.begin(), payload.end()}});
  return {};
}

Status InProcTransport::poll(Clock::time_point deadline, const std::function<void(const InboundMessage&)>& on_message) {
  InProcFabric::Message m;
  if (!fabric_->take(rank_, deadline, m)) return Timeout("nothing arrived");
  do {
    InboundMessage in;
    in.source = m.source;
    in.header = m.header;
    in.payload_size = m.payload.size();
    in.payload = m.payload;
    in.arrived = Clock::now();
    on_message(in);
  } while (fabric_->take(rank_, Clock::time_point::min(), m));
  return {};
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
