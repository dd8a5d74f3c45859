// Process-wide statistics. They outlive engines: a communicator freed before MPI_Finalize still
// counts in the report.
#pragma once

#include <cstdint>
#include <mutex>
#include <random>
#include <vector>

namespace optireduce {

struct CallRecord {
  std::uint64_t bytes = 0;
  std::uint64_t entries = 0;
  std::uint64_t dropped_entries = 0;
  double latency_us = 0;
  bool bounded = false;      // ran under deadlines
  bool fallback = false;     // ran exactly because the loss budget was exceeded
  double deadline_us = 0;    // total budget of a bounded call
};

struct LatencySummary {
  double p50 = 0, p99 = 0, max = 0;
};

struct StatsSnapshot {
  std::uint64_t intercepted_calls = 0;
  std::uint64_t passthrough_calls = 0;
  std::uint64_t bytes_reduced = 0;
  std::uint64_t entries_reduced = 0;
  std::uint64_t entries_dropped = 0;
  std::uint64_t engines_created = 0;
  std::uint64_t engine_failures = 0;
  std::uint64_t bounded_calls = 0;
  std::uint64_t fallback_calls = 0;
  LatencySummary latency_us;
  LatencySummary deadline_us;  // over bounded calls
  double dropped_fraction() const {
    return entries_reduced ? static_cast<double>(entries_dropped) / static_cast<double>(entries_reduced) : 0.0;
  }
};

// Nearest-rank percentile (q in [0, 1]) of unsorted samples; 0 for none.
double percentile(std::vector<double> samples, double q);

class ProcessStats {
 public:
  static ProcessStats& instance();

  void record_intercepted(const CallRecord& call);
  void record_passthrough();
  void record_engine_created();
  void record_engine_failure();
  StatsSnapshot snapshot() const;
  void reset();

 private:
  // Keeps `samples` a uniform sample of everything offered (reservoir), at most kMaxSamples.
  void sample(std::vector<double>& samples, std::uint64_t& seen, double value);

  // Latency samples are kept exactly up to this many, then by reservoir sampling, so memory stays
  // flat however long the job runs.
  static constexpr std::size_t kMaxSamples = 1u << 16;

  mutable std::mutex mutex_;
  StatsSnapshot totals_;
  std::vector<double> latency_samples_;
  std::vector<double> deadline_samples_;
  double deadline_max_ = 0;
  std::uint64_t deadline_seen_ = 0;
  double latency_max_ = 0;
  std::uint64_t latency_seen_ = 0;
  std::mt19937_64 reservoir_rng_{0x0b71};
};

}  // namespace optireduce
