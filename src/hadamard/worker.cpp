#include "optireduce/hadamard/worker.hpp"

namespace optireduce {

HadamardWorker::HadamardWorker() : thread_([this] { run(); }) {}

HadamardWorker::~HadamardWorker() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  changed_.notify_all();
  thread_.join();
}

HadamardWorker::Ticket HadamardWorker::submit(std::function<void()> job) {
  Ticket t;
  {
    std::lock_guard lock(mutex_);
    queue_.push_back(std::move(job));
    t = ++submitted_;
  }
  changed_.notify_all();
  return t;
}

void HadamardWorker::wait(Ticket t) const {
  std::unique_lock lock(mutex_);
  changed_.wait(lock, [&] { return finished_ >= t; });
}

void HadamardWorker::wait_all() const {
  std::unique_lock lock(mutex_);
  changed_.wait(lock, [&] { return finished_ >= submitted_; });
}

void HadamardWorker::run() {
  std::unique_lock lock(mutex_);
  for (;;) {
    changed_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
    if (queue_.empty()) return;  // stopping, and nothing left to do
    auto job = std::move(queue_.front());
    queue_.pop_front();
    lock.unlock();
    job();
    lock.lock();
    ++finished_;
    changed_.notify_all();
  }
}

}  // namespace optireduce
