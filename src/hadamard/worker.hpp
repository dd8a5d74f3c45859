// A second thread that encodes and decodes shards while the calling thread keeps the network
// moving, for hosts where a core is free (OPTIREDUCE_HADAMARD_OVERLAP). Jobs are CPU work on
// disjoint shards, so the engine needs only "is shard p's job done" and "all jobs done"; every
// wait is bounded by that work, never by the network.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>

namespace optireduce {

class HadamardWorker {
 public:
  using Ticket = std::uint64_t;  // 0: "no job", always done

  HadamardWorker();
  ~HadamardWorker();  // finishes queued jobs, then joins
  HadamardWorker(const HadamardWorker&) = delete;
  HadamardWorker& operator=(const HadamardWorker&) = delete;

  Ticket submit(std::function<void()> job);
  void wait(Ticket t) const;
  void wait_all() const;

 private:
  void run();

  mutable std::mutex mutex_;
  mutable std::condition_variable changed_;
  std::deque<std::function<void()>> queue_;
  Ticket submitted_ = 0;
  Ticket finished_ = 0;  // jobs run in order, so every ticket up to this one is done
  bool stopping_ = false;
  std::thread thread_;
};

}  // namespace optireduce
