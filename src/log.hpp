// Leveled logging to stderr (never stdout: the library lives inside other people's jobs).
#pragma once

#include <cstdarg>

namespace optireduce {

enum class LogLevel { error = 0, warn = 1, info = 2, debug = 3 };

void set_log_level(LogLevel level);
LogLevel log_level();
// Rank shown in every line; -1 before it is known.
void set_log_rank(int rank);
bool log_enabled(LogLevel level);
void log_message(LogLevel level, const char* fmt, ...) __attribute__((format(printf, 2, 3)));

}  // namespace optireduce

#define OR_LOG(level, ...)                                                        \
  do {                                                                            \
    if (::optireduce::log_enabled(::optireduce::LogLevel::level))                  \
      ::optireduce::log_message(::optireduce::LogLevel::level, __VA_ARGS__);      \
  } while (0)
