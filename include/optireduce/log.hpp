// Leveled logging to stderr (never stdout: the library lives inside other people's jobs).
//
// Header-only so that the preload library and each transport module (a separate shared object,
// loaded on first use) log through one sink: the library owns the sink and hands it to every
// module it loads (transport_module.hpp). Before that, or without a writer, lines go to stderr.
#pragma once

#include <atomic>
#include <cstdarg>
#include <cstdio>

namespace optireduce {

enum class LogLevel { error = 0, warn = 1, info = 2, debug = 3 };

struct LogSink {
  std::atomic<int> level{static_cast<int>(LogLevel::warn)};
  // Writes one finished line (no newline); null: plain stderr.
  std::atomic<void (*)(LogLevel, const char*)> write{nullptr};
};

// This binary's sink (each shared object has its own; modules forward to the library's).
inline LogSink& log_sink() {
  static LogSink sink;
  return sink;
}

inline bool log_enabled(LogLevel level) {
  return static_cast<int>(level) <= log_sink().level.load(std::memory_order_relaxed);
}

__attribute__((format(printf, 2, 3))) inline void log_message(LogLevel level, const char* fmt, ...) {
  char line[1024];
  va_list args;
  va_start(args, fmt);
  std::vsnprintf(line, sizeof line, fmt, args);
  va_end(args);
  if (auto* write = log_sink().write.load(std::memory_order_acquire)) {
    write(level, line);
  } else {
    std::fprintf(stderr, "optireduce: %s\n", line);
  }
}

}  // namespace optireduce

#define OR_LOG(level, ...)                                                   \
  do {                                                                       \
    if (::optireduce::log_enabled(::optireduce::LogLevel::level))             \
      ::optireduce::log_message(::optireduce::LogLevel::level, __VA_ARGS__); \
  } while (0)
