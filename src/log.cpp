#include "optireduce/engine/log.hpp"

#include <cstdio>
#include <cstring>

namespace optireduce {
namespace {

std::atomic<int> g_rank{-1};

// One write per line so lines of concurrent ranks and threads do not interleave.
void write_line(LogLevel level, const char* text) {
  char line[1200];
  const int n = std::snprintf(line, sizeof line, "optireduce[%d] %s: %s\n", g_rank.load(), to_string(level), text);
  if (n <= 0) return;
  if (static_cast<std::size_t>(n) >= sizeof line) line[sizeof line - 2] = '\n';
  std::fputs(line, stderr);
}

}  // namespace

const char* to_string(LogLevel level) {
  switch (level) {
    case LogLevel::error: return "error";
    case LogLevel::warn: return "warn";
    case LogLevel::info: return "info";
    case LogLevel::debug: return "debug";
  }
  return "?";
}

void set_log_level(LogLevel level) { log_sink().level.store(static_cast<int>(level)); }

void set_log_rank(int rank) {
  g_rank.store(rank);
  log_sink().write.store(&write_line, std::memory_order_release);
}

}  // namespace optireduce
