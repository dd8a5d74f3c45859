// OPTIREDUCE_FAULT_*: the loss, delays and stalls that tests and benchmarks inject into bounded calls.
#pragma once

#include <chrono>
#include <cstdint>
#include <random>
#include <thread>

#include "optireduce/engine/config/engine_options.hpp"

namespace optireduce {

class FaultInjector {
 public:
  FaultInjector(const FaultOptions& options, int rank)
      : options_(options), rank_(rank), rng_(options.seed * 0x9e3779b97f4a7c15ull + static_cast<std::uint64_t>(rank)) {}

  // Before a bounded call: this rank may enter it late.
  void maybe_delay_entry() {
    if (options_.delay_rank != rank_ || !(options_.delay_ms > 0) || !chance(options_.delay_probability)) return;
    std::this_thread::sleep_for(std::chrono::duration<double, std::milli>(options_.delay_ms));
  }
  // As this rank gives up on a call (before its failure notice leaves): it may stop a while, as
  // a loaded host or SIGSTOP may stop it just then.
  void maybe_stall_at_give_up() const {
    if (options_.stall_rank != rank_ || !(options_.stall_ms > 0)) return;
    std::this_thread::sleep_for(std::chrono::duration<double, std::milli>(options_.stall_ms));
  }
  // For each chunk a bounded call receives: true when it is to be discarded.
  bool drop_received_chunk() {
    if (!(options_.drop > 0) || !chance(options_.drop)) return false;
    ++injected_drops_;
    return true;
  }
  std::uint64_t injected_drops() const { return injected_drops_; }
  bool active() const { return options_.any(); }

 private:
  bool chance(double p) { return std::uniform_real_distribution<double>(0, 1)(rng_) < p; }

  FaultOptions options_;
  int rank_;
  std::mt19937_64 rng_;
  std::uint64_t injected_drops_ = 0;
};

}  // namespace optireduce
