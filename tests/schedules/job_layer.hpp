// The job's own layer of a seed's run (what MPI's all-gather, exact sum and communicator split
// are to the engine), checked: every collective pairs the same call on every rank of its group,
// and every rank comes. A rank missing past kHangBound is a hang, which the rendezvous ends by
// handing back empty blobs (the engines then fail, and the run reports the hang).
#pragma once

#include <atomic>
#include <condition_variable>
#include <map>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <vector>

#include "../unit/inproc_transport.hpp"

namespace optireduce::schedules {

// One group's rendezvous: the communicator's ranks, or a group split from them (a slice's
// holders). Groups split from one share its list of problems.
class Rendezvous {
 public:
  explicit Rendezvous(int ranks);
  // `tag`: the call the rank is in (all of a collective's members must be in the same one).
  std::vector<std::vector<std::byte>> allgather(int rank, int tag, std::span<const std::byte> mine);
  // The group split from this one as the `split`-th split with this color (the same object for
  // every member that asks).
  std::shared_ptr<Rendezvous> group(std::uint64_t split, int color, int members);
  std::vector<std::string> problems();

 private:
  struct Problems {
    std::mutex mutex;
    std::vector<std::string> list;
  };
  Rendezvous(int ranks, std::shared_ptr<Problems> problems);
  void report(const std::string& what);

  const int ranks_;
  std::shared_ptr<Problems> problems_;
  std::mutex mutex_;
  std::condition_variable cv_;
  std::vector<std::vector<std::byte>> slots_, result_;
  std::vector<int> tags_;
  int count_ = 0;
  unsigned generation_ = 0;
  bool broken_ = false;
  std::map<std::pair<std::uint64_t, int>, std::shared_ptr<Rendezvous>> groups_;
};

// One rank's view of a group: its all-gather, its exact sum (over the all-gather, in rank order)
// and its splits, each tagged with the call the rank is in.
class CheckedBootstrap final : public testing::AllgatherBootstrap {
 public:
  CheckedBootstrap(std::shared_ptr<Rendezvous> rendezvous, int rank, const std::atomic<int>& call)
      : rendezvous_(std::move(rendezvous)), rank_(rank), call_(call) {}
  std::vector<std::vector<std::byte>> allgather(std::span<const std::byte> mine) override {
    return rendezvous_->allgather(rank_, call_.load(), mine);
  }
  // The members of this rank's color, ordered by key then rank (a slice's holders, by host).
  bool split(int color, int key, std::unique_ptr<Bootstrap>& out) override;

 private:
  std::shared_ptr<Rendezvous> rendezvous_;
  int rank_;
  const std::atomic<int>& call_;
  std::uint64_t splits_ = 0;
};

}  // namespace optireduce::schedules
