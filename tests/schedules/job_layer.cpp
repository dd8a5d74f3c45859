#include "job_layer.hpp"

#include <algorithm>
#include <cstring>
#include <sstream>

namespace optireduce::schedules {

namespace {

// How long a rank may wait in a collective of the job's own layer for the others: longer than
// any engine wait (hard deadline, watchdog, a calibration rerun's watchdog after the run's
// exchange: TarCall::longest_exchange_lag) before they must have come.
constexpr auto kHangBound = std::chrono::seconds(30);

}  // namespace

Rendezvous::Rendezvous(int ranks) : Rendezvous(ranks, std::make_shared<Problems>()) {}

Rendezvous::Rendezvous(int ranks, std::shared_ptr<Problems> problems)
    : ranks_(ranks), problems_(std::move(problems)), slots_(static_cast<std::size_t>(ranks)), tags_(static_cast<std::size_t>(ranks)) {}

void Rendezvous::report(const std::string& what) {
  std::lock_guard lock(problems_->mutex);
  problems_->list.push_back(what);
}

std::vector<std::string> Rendezvous::problems() {
  std::lock_guard lock(problems_->mutex);
  return problems_->list;
}

std::vector<std::vector<std::byte>> Rendezvous::allgather(int rank, int tag, std::span<const std::byte> mine) {
  std::unique_lock lock(mutex_);
  if (broken_) return std::vector<std::vector<std::byte>>(static_cast<std::size_t>(ranks_));
  const unsigned generation = generation_;
  slots_[static_cast<std::size_t>(rank)].assign(mine.begin(), mine.end());
  tags_[static_cast<std::size_t>(rank)] = tag;
  if (++count_ == ranks_) {
    for (int r = 1; r < ranks_; ++r)
      if (tags_[static_cast<std::size_t>(r)] != tags_[0]) {
        std::ostringstream m;
        m << "a collective of the job's own layer paired call " << tags_[0] << " on member 0 of a group of " << ranks_
          << " with call " << tags_[static_cast<std::size_t>(r)] << " on member " << r;
        report(m.str());
        break;
      }
    result_ = slots_;
    count_ = 0;
    ++generation_;
    cv_.notify_all();
    return result_;
  }
  if (!cv_.wait_until(lock, Clock::now() + kHangBound, [&] { return generation_ != generation || broken_; })) {
    std::ostringstream m;
    m << "hang: member " << rank << " of a group of " << ranks_ << " waited " << kHangBound.count()
      << " s in a collective of the job's own layer (call " << tag << ") that not every member entered";
    report(m.str());
    broken_ = true;
    cv_.notify_all();
  }
  if (broken_) return std::vector<std::vector<std::byte>>(static_cast<std::size_t>(ranks_));
  return result_;
}

std::shared_ptr<Rendezvous> Rendezvous::group(std::uint64_t split, int color, int members) {
  std::lock_guard lock(mutex_);
  auto& g = groups_[{split, color}];
  if (!g) g = std::shared_ptr<Rendezvous>(new Rendezvous(members, problems_));
  return g;
}

bool CheckedBootstrap::split(int color, int key, std::unique_ptr<Bootstrap>& out) {
  const int mine[2] = {color, key};
  const auto all = allgather(std::as_bytes(std::span<const int>(mine)));
  const std::uint64_t split = ++splits_;
  out.reset();
  std::vector<std::pair<int, int>> members;  // (key, rank)
  for (int r = 0; r < static_cast<int>(all.size()); ++r) {
    int theirs[2];
    if (all[static_cast<std::size_t>(r)].size() != sizeof theirs) return false;  // a hang broke the group
    std::memcpy(theirs, all[static_cast<std::size_t>(r)].data(), sizeof theirs);
    if (color >= 0 && theirs[0] == color) members.emplace_back(theirs[1], r);
  }
  if (color < 0) return true;
  std::sort(members.begin(), members.end());
  const auto me = std::find(members.begin(), members.end(), std::pair<int, int>(key, rank_)) - members.begin();
  out = std::make_unique<CheckedBootstrap>(rendezvous_->group(split, color, static_cast<int>(members.size())), static_cast<int>(me), call_);
  return true;
}

}  // namespace optireduce::schedules
