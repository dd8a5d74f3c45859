// A scoped guard that ends the test binary, failing, where what it guards does not finish within
// its limit. The in-process tests run ranks as threads: a call that hangs holds its threads (and
// ctest) for ever, and no assertion can end a thread that never returns, so the guard's own thread
// prints one line naming the test, what hangs and the limit, then exits with status 3. Leaving the
// guard's scope (the guarded work finished) stops that thread at once: the normal path waits for
// nothing.
#pragma once

#include <gtest/gtest.h>

#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <string>
#include <thread>

namespace optireduce::testing {

class HangGuard {
 public:
  // `what`: what is guarded, as the line names it ("the job", "a rank's calls").
  HangGuard(std::chrono::seconds limit, std::string what) : test_(current_test()), what_(std::move(what)) {
    thread_ = std::thread([this, limit] {
      std::unique_lock lock(mutex_);
      if (cv_.wait_for(lock, limit, [this] { return done_; })) return;
      std::fprintf(stderr, "hang guard: %s: %s did not finish within %lld s: it hangs; ending the test binary (exit 3)\n",
                   test_.c_str(), what_.c_str(), static_cast<long long>(limit.count()));
      std::fflush(stderr);
      std::_Exit(3);
    });
  }
  ~HangGuard() {
    {
      std::lock_guard lock(mutex_);
      done_ = true;
    }
    cv_.notify_all();
    thread_.join();
  }
  HangGuard(const HangGuard&) = delete;
  HangGuard& operator=(const HangGuard&) = delete;

 private:
  static std::string current_test() {
    const ::testing::TestInfo* info = ::testing::UnitTest::GetInstance()->current_test_info();
    return info ? std::string(info->test_suite_name()) + "." + info->name() : std::string("(outside a test)");
  }

  std::string test_;
  std::string what_;
  std::mutex mutex_;
  std::condition_variable cv_;
  bool done_ = false;
  std::thread thread_;
};

}  // namespace optireduce::testing
