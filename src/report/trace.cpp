#include "optireduce/engine/report/trace.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>

namespace optireduce {

CallTrace::~CallTrace() { close(); }

bool CallTrace::open(const std::string& path) {
  close();
  fd_ = ::open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  return fd_ >= 0;
}

void CallTrace::close() {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
}


void CallTrace::write(int rank, const CallStats& c) {
  if (fd_ < 0) return;
  char line[448];
  int n = std::snprintf(line, sizeof line, "%d %llu %llu %s %s %.1f %.1f %.1f %.1f %.1f %llu %llu %d %.1f %c%c\n", rank,
                              static_cast<unsigned long long>(c.sequence), static_cast<unsigned long long>(c.entries),
                              to_string(c.kind), to_string(c.status.code()), c.deadline_us[0], c.deadline_us[1],
                              c.phase_us[0], c.phase_us[1], c.latency_us,
                              static_cast<unsigned long long>(c.dropped_entries),
                              static_cast<unsigned long long>(c.filled_entries), c.transformed ? 1 : 0, c.stall_us,
                              static_cast<char>(c.held[0]), static_cast<char>(c.held[1]));
  // A three-stage call adds its stages: time in each, bytes over the network and shared memory.
  if (n > 0 && c.stages.hierarchical && static_cast<std::size_t>(n) < sizeof line) {
    const auto& s = c.stages;
    n += std::snprintf(line + n - 1, sizeof line - static_cast<std::size_t>(n) + 1, " %.1f %.1f %.1f %llu %llu\n", s.host_reduce_us,
                       s.exchange_us, s.host_gather_us, static_cast<unsigned long long>(s.network_bytes),
                       static_cast<unsigned long long>(s.shared_memory_bytes)) - 1;
  }
  if (n > 0) (void)!::write(fd_, line, static_cast<std::size_t>(std::min<int>(n, sizeof line - 1)));
}

}  // namespace optireduce
