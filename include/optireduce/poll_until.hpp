// Blocking on one file descriptor until a point in time, as the transports wait for events.
#pragma once

#include <poll.h>

#include <chrono>
#include <ctime>

#include "optireduce/transport.hpp"

namespace optireduce {

// ppoll() on `pfd` until `until` (at once when it has passed); returns ppoll's count, 0 on timeout.
inline int poll_until(pollfd& pfd, Clock::time_point until) {
  const auto left = std::chrono::duration_cast<std::chrono::nanoseconds>(until - Clock::now()).count();
  const long long ns = left > 0 ? left : 0;
  const timespec ts{static_cast<time_t>(ns / 1000000000), static_cast<long>(ns % 1000000000)};
  return ::ppoll(&pfd, 1, &ts, nullptr);
}

}  // namespace optireduce
