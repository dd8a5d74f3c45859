// The reachability probe loop both datagram transports run in connect(): hellos to the pending
// peers, ever less often, until the handshake is complete or the deadline passes. Then, since
// this rank stops reading until its first poll() and its last answers may have been lost, a few
// more hellos to every peer saying that both directions work.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "handshake.hpp"
#include "optireduce/status.hpp"
#include "optireduce/transport.hpp"

namespace optireduce::datagram {

struct ProbeSteps {
  std::function<void(const std::vector<int>& peers)> greet;  // a hello to each of them, sent at once
  std::function<void()> progress;                            // send what is queued, read what arrived
  std::function<void(Clock::time_point until)> wait;         // block until a datagram or `until`
};

// Ok once complete; a timeout naming the ranks that did not answer both ways over `path`.
Status run_probe(Handshake& handshake, const ProbeSteps& steps, Clock::time_point deadline, const std::string& path);

}  // namespace optireduce::datagram
