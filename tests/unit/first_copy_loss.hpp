// A lossy datagram network for the in-process transport's drop hook.
#pragma once

#include <cstdint>
#include <mutex>
#include <set>
#include <span>
#include <tuple>

#include "optireduce/engine/tar/wire_header.hpp"

namespace optireduce::testing {

// A network that loses every 16th data message the first time it is sent, never the same one
// twice: datagrams lost on the way, as a datagram transport sees them (not chunks discarded at
// the receiver, which fault injection models and which no resend brings back).
class FirstCopyLoss {
 public:
  bool operator()(int from, int to, std::span<const std::byte> header) {
    WireHeader h;
    if (!decode(header, h)) return false;
    std::lock_guard lock(mutex_);
    if (++sent_ % 16 != 0) return false;
    return lost_.emplace(from, to, static_cast<int>(h.kind), h.epoch, h.offset).second;
  }

 private:
  std::mutex mutex_;
  std::uint64_t sent_ = 0;
  std::set<std::tuple<int, int, int, std::uint64_t, std::uint64_t>> lost_;
};

}  // namespace optireduce::testing
