// Pacing of outgoing datagrams: a token bucket in bytes. A datagram may leave when the bucket
// holds its size; the bucket refills at `rate` and holds at most `burst`, so a rank never puts
// more than `burst` bytes in front of the network at once. A rate of 0 does not pace.
#pragma once

#include <algorithm>
#include <chrono>

namespace optireduce::datagram {

class TokenBucket {
 public:
  using Clock = std::chrono::steady_clock;

  TokenBucket(double bytes_per_s, double burst_bytes) { configure(bytes_per_s, burst_bytes); }

  void configure(double bytes_per_s, double burst_bytes) {
    rate_ = std::max(bytes_per_s, 0.0);
    burst_ = std::max(burst_bytes, 1.0);
    tokens_ = std::min(tokens_, burst_);
  }
  double rate() const { return rate_; }
  bool paced() const { return rate_ > 0; }

  // Takes `bytes` if they are there (a datagram larger than the burst needs a full bucket).
  bool try_take(double bytes, Clock::time_point now) {
    if (!paced()) return true;
    refill(now);
    const double need = std::min(bytes, burst_);
    if (tokens_ < need) return false;
    tokens_ -= bytes;  // may go negative for an oversized datagram: it is paid for afterwards
    return true;
  }

  // Gives back what try_take took for a datagram that did not leave after all.
  void refund(double bytes) { tokens_ = std::min(burst_, tokens_ + bytes); }

  // When `bytes` will be available.
  Clock::time_point ready_at(double bytes, Clock::time_point now) {
    if (!paced()) return now;
    refill(now);
    const double missing = std::min(bytes, burst_) - tokens_;
    if (missing <= 0) return now;
    return now + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(missing / rate_));
  }

 private:
  void refill(Clock::time_point now) {
    if (now > last_) tokens_ = std::min(burst_, tokens_ + rate_ * std::chrono::duration<double>(now - last_).count());
    last_ = now;
  }

  double rate_ = 0, burst_ = 1, tokens_ = 0;
  Clock::time_point last_ = Clock::now();
};

}  // namespace optireduce::datagram
