// Waiting for a word that another process on the host changes, in memory both map (a
// HostSegment's counters): the waiter sleeps in the kernel (a futex on the word, shared between
// processes, not private to one) instead of spinning, so a local rank with nothing to do leaves
// its core to the ranks that still send, receive and sum; the process that changes the word
// wakes the sleepers. Every sleep is bounded: the caller checks its own deadline between sleeps.
#pragma once

#include <atomic>
#include <cstdint>

#include "optireduce/transport.hpp"

namespace optireduce {

// Sleeps while `word` still holds `seen` (compared on its low 32 bits, which is what the kernel
// watches), until woken by wake_sleepers(word), `until`, or kLongestSharedSleep, whichever is
// first. May return early (a signal, a wake for another value): the caller reads the word again.
void sleep_while_unchanged(const std::atomic<std::uint64_t>& word, std::uint64_t seen, Clock::time_point until);

// Wakes every process sleeping on `word`; to be called after each store the sleepers wait for.
void wake_sleepers(const std::atomic<std::uint64_t>& word);

// The longest single sleep: a waiter whose deadline may move (a local rank's progress mark) reads
// it again at least this often.
inline constexpr auto kLongestSharedSleep = std::chrono::milliseconds(2);

}  // namespace optireduce
