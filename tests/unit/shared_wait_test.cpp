// Waiting on a word another process changes (hierarchy/shared_wait): a sleeper in one process is
// woken by a store in another through memory both map, and every sleep is bounded.
#include <gtest/gtest.h>

#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <new>

#include "optireduce/engine/hierarchy/shared_wait.hpp"

namespace optireduce {
namespace {

// A word in an anonymous shared mapping: a forked child shares it, as local ranks share a segment.
struct SharedWord {
  void* map = mmap(nullptr, sizeof(std::atomic<std::uint64_t>), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  std::atomic<std::uint64_t>* word = map == MAP_FAILED ? nullptr : new (map) std::atomic<std::uint64_t>(0);
  ~SharedWord() {
    if (map != MAP_FAILED) munmap(map, sizeof(std::atomic<std::uint64_t>));
  }
};

// Values above 2^32 whose low halves differ: the kernel compares the low half.
constexpr std::uint64_t kBefore = (std::uint64_t{5} << 32) + 41, kAfter = kBefore + 1;

TEST(SharedWait, ASleeperInAnotherProcessSeesTheStoreItWaitedFor) {
  SharedWord shared;
  ASSERT_NE(shared.word, nullptr);
  shared.word->store(kBefore);
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    const auto until = Clock::now() + std::chrono::seconds(60);
    std::uint64_t seen;
    while ((seen = shared.word->load(std::memory_order_acquire)) == kBefore && Clock::now() < until)
      sleep_while_unchanged(*shared.word, seen, until);
    _exit(seen == kAfter ? 0 : 1);
  }
  shared.word->store(kAfter, std::memory_order_release);
  wake_sleepers(*shared.word);
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0) << "the child never saw the value its wait was for";
}

// Nobody wakes it: each sleep still returns, and a loop bounded by its deadline ends.
TEST(SharedWait, ASleepNobodyEndsReturnsByItsDeadline) {
  std::atomic<std::uint64_t> word{kBefore};
  const auto until = Clock::now() + 5 * kLongestSharedSleep;
  int sleeps = 0;
  while (Clock::now() < until) {
    sleep_while_unchanged(word, kBefore, until);
    ++sleeps;
  }
  EXPECT_GE(sleeps, 1);
  EXPECT_EQ(word.load(), kBefore);
}

// A word that no longer holds what the caller saw, or a deadline already past: it returns, and
// it leaves the word alone; a wake with no sleeper does nothing.
TEST(SharedWait, ReturnsAtOnceForAChangedWordOrAPastDeadline) {
  std::atomic<std::uint64_t> word{kAfter};
  sleep_while_unchanged(word, kBefore, Clock::now() + std::chrono::seconds(60));
  sleep_while_unchanged(word, kAfter, Clock::now() - std::chrono::seconds(1));
  wake_sleepers(word);  // no sleeper: nothing happens
  EXPECT_EQ(word.load(), kAfter);
}

}  // namespace
}  // namespace optireduce
