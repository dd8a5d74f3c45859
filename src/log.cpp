#include "log.hpp"

#include <atomic>
#include <cstdio>
#include <cstring>

namespace optireduce {
namespace {
std::atomic<int> g_level{static_cast<int>(LogLevel::warn)};
std::atomic<int> g_rank{-1};
const char* level_name(LogLevel level) {
  switch (level) {
    case LogLevel::error: return "error";
    case LogLevel::warn: return "warn";
    case LogLevel::info: return "info";
    case LogLevel::debug: return "debug";
  }
  return "?";
}
}  // namespace

void set_log_level(LogLevel level) { g_level.store(static_cast<int>(level)); }
LogLevel log_level() { return static_cast<LogLevel>(g_level.load()); }
void set_log_rank(int rank) { g_rank.store(rank); }
bool log_enabled(LogLevel level) { return static_cast<int>(level) <= g_level.load(std::memory_order_relaxed); }

void log_message(LogLevel level, const char* fmt, ...) {
  // One write per line so lines of concurrent ranks and threads do not interleave.
  char line[1024];
  int n = std::snprintf(line, sizeof line, "optireduce[%d] %s: ", g_rank.load(), level_name(level));
  va_list ap;
  va_start(ap, fmt);
  if (n > 0 && n < static_cast<int>(sizeof line)) n += std::vsnprintf(line + n, sizeof line - n, fmt, ap);
  va_end(ap);
  if (n < 0) return;
  std::size_t len = std::strlen(line);
  if (len + 1 < sizeof line) {
    line[len++] = '\n';
    line[len] = '\0';
  } else {
    line[sizeof line - 2] = '\n';
  }
  std::fputs(line, stderr);
}

}  // namespace optireduce
