#include "launcher_probe.hpp"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>

namespace optireduce::tools {
namespace {

using Clock = std::chrono::steady_clock;

// Starts `program argument` with stdin /dev/null and stdout and stderr into *output. A failed
// exec is told through *exec_status (its errno), which closes without data on success.
pid_t spawn(const std::string& program, const char* argument, int* output, int* exec_status) {
  int out[2], status[2];
  if (pipe2(out, O_CLOEXEC) != 0) return -1;
  if (pipe2(status, O_CLOEXEC) != 0) {
    close(out[0]), close(out[1]);
    return -1;
  }
  const pid_t pid = fork();
  if (pid == 0) {
    const int null = open("/dev/null", O_RDONLY);
    if (null >= 0) dup2(null, 0);
    dup2(out[1], 1);
    dup2(out[1], 2);
    execlp(program.c_str(), program.c_str(), argument, static_cast<char*>(nullptr));
    const int e = errno;
    (void)!write(status[1], &e, sizeof e);
    _exit(127);
  }
  close(out[1]);
  close(status[1]);
  if (pid < 0) {
    close(out[0]), close(status[0]);
    return -1;
  }
  *output = out[0];
  *exec_status = status[0];
  return pid;
}

// Reads `fd` to its end (at most 1 MiB); false when `deadline` came first.
bool read_all(int fd, std::string& text, Clock::time_point deadline) {
  char buffer[4096];
  while (text.size() < (1u << 20)) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
    if (left.count() <= 0) return false;
    pollfd p{fd, POLLIN, 0};
    const int r = poll(&p, 1, static_cast<int>(left.count()));
    if (r < 0 && errno == EINTR) continue;
    if (r == 0) return false;
    if (r < 0) return true;
    const ssize_t n = read(fd, buffer, sizeof buffer);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return true;
    text.append(buffer, static_cast<std::size_t>(n));
  }
  return true;
}

}  // namespace

Probe run_probe(const std::string& program, const char* argument) {
  Probe probe;
  int output = -1, exec_status = -1;
  const pid_t pid = spawn(program, argument, &output, &exec_status);
  if (pid < 0) {
    probe.error = std::strerror(errno);
    return probe;
  }
  int exec_errno = 0;
  const bool exec_failed = read(exec_status, &exec_errno, sizeof exec_errno) == sizeof exec_errno;
  close(exec_status);
  const bool finished = read_all(output, probe.output, Clock::now() + std::chrono::seconds(10));
  close(output);
  if (!finished) kill(pid, SIGKILL);
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (exec_failed) probe.error = std::strerror(exec_errno);
  else if (!finished) probe.error = "no answer within 10 s";
  else probe.ran = true;
  return probe;
}

}  // namespace optireduce::tools
