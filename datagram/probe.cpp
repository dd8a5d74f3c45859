#include "probe.hpp"

#include <algorithm>

namespace optireduce::datagram {
namespace {

constexpr auto kFirstHelloInterval = std::chrono::milliseconds(1);
constexpr auto kLongestHelloInterval = std::chrono::milliseconds(64);
constexpr int kFinalHellos = 5;  // all lost to one peer: p^5 at loss p
constexpr auto kFinalHelloInterval = std::chrono::milliseconds(2);

}  // namespace

Status run_probe(Handshake& handshake, const ProbeSteps& steps, Clock::time_point deadline, const std::string& path) {
  auto interval = std::chrono::duration_cast<Clock::duration>(kFirstHelloInterval);
  auto next_hello = Clock::now();
  while (!handshake.complete()) {
    const auto now = Clock::now();
    if (now >= deadline)
      return Timeout("no answer both ways from ranks " + handshake.pending_list() + " over " + path +
                     " (is UDP blocked between the hosts?)");
    if (now >= next_hello) {
      steps.greet(handshake.pending());
      next_hello = now + interval;
      interval = std::min<Clock::duration>(2 * interval, kLongestHelloInterval);
    }
    steps.progress();
    if (!handshake.complete()) steps.wait(std::min(next_hello, deadline));
  }
  for (int round = 0; round < kFinalHellos; ++round) {
    steps.greet(handshake.peers());
    const auto until = std::min(Clock::now() + kFinalHelloInterval, deadline);
    do {
      steps.progress();
      steps.wait(until);
    } while (Clock::now() < until);
  }
  return Status::Ok();
}

}  // namespace optireduce::datagram
