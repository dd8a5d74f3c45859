// Process-wide statistics. They outlive engines: a communicator freed before MPI_Finalize still
// counts in the report.
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <mutex>
#include <random>
#include <span>
#include <string>
#include <vector>

#include "optireduce/engine/report/call_stats.hpp"
#include "optireduce/engine/tar/call_shape.hpp"
#include "optireduce/pass_reason.hpp"

namespace optireduce {

struct CallRecord {
  std::uint64_t bytes = 0;
  std::uint64_t entries = 0;
  std::uint64_t dropped_entries = 0;
  double latency_us = 0;
  bool bounded = false;      // ran under deadlines
  bool fallback = false;     // ran exactly because the loss budget was exceeded
  double deadline_us = 0;    // total budget of a bounded call
  bool cut = false;          // a phase closed at its deadline (or grace) before all its data was in
  bool over_mpi = false;     // stepped aside to the MPI's allreduce, measured faster (never a fallback)
  CallShape shape{};         // what the call computed: collective and element format
  StageStats stages{};       // of a three-stage call
};

// The report's key of a reason, e.g. "device_buffer".
const char* to_string(PassReason reason);

struct LatencySummary {
  double p50 = 0, p99 = 0, max = 0;
};

// Engine calls of one size class (power-of-two byte range, the deadlines' unit).
struct SizeClassSummary {
  unsigned size_class = 0;  // bytes in [2^size_class, 2^(size_class+1))
  std::uint64_t calls = 0;
  std::uint64_t cut_calls = 0;
  LatencySummary latency_us;
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
  std::uint64_t mpi_calls = 0;        // intercepted, then stepped aside to the MPI's allreduce
  std::uint64_t cut_calls = 0;        // bounded calls a deadline closed before all data was in
  double engine_time_us = 0;          // summed latency of intercepted calls
  double passthrough_time_us = 0;     // summed time of MPI_Allreduce calls passed to the MPI
  std::array<std::uint64_t, kPassReasons> passthrough_by_reason{};
  // Intercepted calls by what they computed (CallShape::index()), and passthrough calls by collective.
  std::array<std::uint64_t, kCallShapes> intercepted_by_shape{};
  std::array<std::uint64_t, kCollectives> passthrough_by_collective{};
  // Three-stage calls (hierarchy/host_tiers.hpp): how many, their stages summed, and the
  // placement of the communicator that last took them ("2+2": ranks on each host).
  std::uint64_t hierarchical_calls = 0;
  StageStats stage_totals;
  std::string placement;
  LatencySummary latency_us;
  LatencySummary deadline_us;  // over bounded calls
  std::vector<SizeClassSummary> size_classes;  // ascending
  double dropped_fraction() const {
    return entries_reduced ? static_cast<double>(entries_dropped) / static_cast<double>(entries_reduced) : 0.0;
  }
};

// Nearest-rank percentile (q in [0, 1]) of unsorted samples; 0 for none.
double percentile(std::vector<double> samples, double q);
// The same over `samples` itself, which it reorders (no copy: for the per-call paths).
double percentile_in_place(std::span<double> samples, double q);

// A uniform sample of everything offered (reservoir sampling) of at most `limit` values, so memory
// stays flat however long the job runs, and the exact maximum.
class Reservoir {
 public:
  explicit Reservoir(std::size_t limit) : limit_(limit) {}
  void add(double value, std::mt19937_64& rng);
  LatencySummary summary() const;
  std::uint64_t seen() const { return seen_; }

 private:
  std::size_t limit_;
  std::vector<double> samples_;
  std::uint64_t seen_ = 0;
  double max_ = 0;
};

class ProcessStats {
 public:
  static ProcessStats& instance();

  void record_intercepted(const CallRecord& call);
  // elapsed_us: how long the MPI took (0 when not measured, e.g. a non-blocking start).
  void record_passthrough(PassReason reason, double elapsed_us = 0, Collective collective = Collective::allreduce);
  void record_engine_created();
  void record_engine_failure();
  void record_placement(const std::string& placement);
  StatsSnapshot snapshot() const;
  void reset();

 private:
  // Exact up to these many samples, then a reservoir.
  static constexpr std::size_t kMaxSamples = 1u << 16;
  static constexpr std::size_t kMaxClassSamples = 1u << 13;

  struct SizeClass {
    Reservoir latency{kMaxClassSamples};
    std::uint64_t cut_calls = 0;
  };

  mutable std::mutex mutex_;
  StatsSnapshot totals_;
  Reservoir latency_{kMaxSamples};
  Reservoir deadline_{kMaxSamples};
  std::map<unsigned, SizeClass> size_classes_;
  std::mt19937_64 reservoir_rng_{0x0b71};
};

}  // namespace optireduce
