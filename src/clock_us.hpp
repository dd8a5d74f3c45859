// Microseconds on the engine's clock: the unit of every phase time, deadline and budget.
#pragma once

#include <chrono>

#include "optireduce/transport.hpp"

namespace optireduce {

inline double us_since(Clock::time_point t) { return std::chrono::duration<double, std::micro>(Clock::now() - t).count(); }

inline Clock::duration us_duration(double us) {
  return std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double, std::micro>(us));
}

inline Clock::time_point after_us(Clock::time_point t, double us) { return t + us_duration(us); }

}  // namespace optireduce
