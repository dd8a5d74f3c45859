#include "optireduce/engine/hierarchy/shared_wait.hpp"

#include <linux/futex.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <climits>

namespace optireduce {
namespace {

static_assert(sizeof(std::atomic<std::uint64_t>) == sizeof(std::uint64_t) && std::atomic<std::uint64_t>::is_always_lock_free,
              "a futex watches the counter's own memory");

// The 32 bits of the word the kernel compares: its low half, wherever the byte order puts it.
std::uint32_t* low_half(const std::atomic<std::uint64_t>& word) {
  auto* half = reinterpret_cast<std::uint32_t*>(const_cast<std::atomic<std::uint64_t>*>(&word));
  return std::endian::native == std::endian::little ? half : half + 1;
}

}  // namespace

void sleep_while_unchanged(const std::atomic<std::uint64_t>& word, std::uint64_t seen, Clock::time_point until) {
  const auto now = Clock::now();
  const auto wait = std::min(until - now, std::chrono::duration_cast<Clock::duration>(kLongestSharedSleep));
  if (wait <= Clock::duration::zero()) return;
  const auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(wait).count();
  timespec relative{static_cast<time_t>(ns / 1000000000), static_cast<long>(ns % 1000000000)};
  // Not FUTEX_PRIVATE_FLAG: the waker is another process mapping the same object.
  syscall(SYS_futex, low_half(word), FUTEX_WAIT, static_cast<std::uint32_t>(seen), &relative, nullptr, 0);
}

void wake_sleepers(const std::atomic<std::uint64_t>& word) {
  syscall(SYS_futex, low_half(word), FUTEX_WAKE, INT_MAX, nullptr, nullptr, 0);
}

}  // namespace optireduce
