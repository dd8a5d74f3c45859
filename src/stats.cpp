#include "optireduce/engine/stats.hpp"

#include <algorithm>
#include <cmath>

namespace optireduce {

double percentile(std::vector<double> samples, double q) {
  if (samples.empty()) return 0.0;
  const auto rank = static_cast<std::size_t>(std::ceil(q * static_cast<double>(samples.size())));
  const std::size_t index = std::min(samples.size() - 1, rank == 0 ? 0 : rank - 1);
  std::nth_element(samples.begin(), samples.begin() + static_cast<std::ptrdiff_t>(index), samples.end());
  return samples[index];
}

ProcessStats& ProcessStats::instance() {
  static ProcessStats stats;
  return stats;
}

void ProcessStats::record_intercepted(const CallRecord& call) {
  std::lock_guard lock(mutex_);
  ++totals_.intercepted_calls;
  totals_.bytes_reduced += call.bytes;
  totals_.entries_reduced += call.entries;
  totals_.entries_dropped += call.dropped_entries;
  latency_max_ = std::max(latency_max_, call.latency_us);
  sample(latency_samples_, latency_seen_, call.latency_us);
  if (call.bounded) {
    ++totals_.bounded_calls;
    deadline_max_ = std::max(deadline_max_, call.deadline_us);
    sample(deadline_samples_, deadline_seen_, call.deadline_us);
  }
  if (call.fallback) ++totals_.fallback_calls;
}

void ProcessStats::sample(std::vector<double>& samples, std::uint64_t& seen, double value) {
  ++seen;
  if (samples.size() < kMaxSamples) {
    samples.push_back(value);
    return;
  }
  std::uniform_int_distribution<std::uint64_t> pick(0, seen - 1);
  const std::uint64_t slot = pick(reservoir_rng_);
  if (slot < kMaxSamples) samples[slot] = value;
}

void ProcessStats::record_passthrough() {
  std::lock_guard lock(mutex_);
  ++totals_.passthrough_calls;
}

void ProcessStats::record_engine_created() {
  std::lock_guard lock(mutex_);
  ++totals_.engines_created;
}

void ProcessStats::record_engine_failure() {
  std::lock_guard lock(mutex_);
  ++totals_.engine_failures;
}

StatsSnapshot ProcessStats::snapshot() const {
  std::lock_guard lock(mutex_);
  StatsSnapshot s = totals_;
  s.latency_us = {percentile(latency_samples_, 0.50), percentile(latency_samples_, 0.99), latency_max_};
  s.deadline_us = {percentile(deadline_samples_, 0.50), percentile(deadline_samples_, 0.99), deadline_max_};
  return s;
}

void ProcessStats::reset() {
  std::lock_guard lock(mutex_);
  totals_ = {};
  latency_samples_.clear();
  latency_max_ = 0;
  latency_seen_ = 0;
  deadline_samples_.clear();
  deadline_max_ = 0;
  deadline_seen_ = 0;
}

}  // namespace optireduce
