#include "optireduce/engine/report/stats.hpp"

#include <algorithm>
#include <bit>
#include <cmath>

namespace optireduce {

const char* to_string(PassReason reason) {
  switch (reason) {
    case PassReason::datatype: return "datatype";
    case PassReason::op: return "op";
    case PassReason::communicator: return "communicator";
    case PassReason::arguments: return "arguments";
    case PassReason::size: return "below_min_bytes";
    case PassReason::mode_off: return "mode_off";
    case PassReason::no_engine: return "no_engine";
    case PassReason::engine_failed: return "engine_failed";
    case PassReason::nonblocking: return "nonblocking";
    case PassReason::device_buffer: return "device_buffer";
    case PassReason::user_op_not_sum: return "user_op_not_sum";
    case PassReason::user_op_unknown: return "user_op_unknown";
    case PassReason::user_op_disagreement: return "user_op_disagreement";
    case PassReason::count_: break;
  }
  return "?";
}

double percentile(std::vector<double> samples, double q) { return percentile_in_place(samples, q); }

double percentile_in_place(std::span<double> samples, double q) {
  if (samples.empty()) return 0.0;
  const auto rank = static_cast<std::size_t>(std::ceil(q * static_cast<double>(samples.size())));
  const std::size_t index = std::min(samples.size() - 1, rank == 0 ? 0 : rank - 1);
  std::nth_element(samples.begin(), samples.begin() + static_cast<std::ptrdiff_t>(index), samples.end());
  return samples[index];
}

void Reservoir::add(double value, std::mt19937_64& rng) {
  ++seen_;
  max_ = std::max(max_, value);
  if (samples_.size() < limit_) {
    samples_.push_back(value);
    return;
  }
  std::uniform_int_distribution<std::uint64_t> pick(0, seen_ - 1);
  const std::uint64_t slot = pick(rng);
  if (slot < limit_) samples_[slot] = value;
}

LatencySummary Reservoir::summary() const { return {percentile(samples_, 0.50), percentile(samples_, 0.99), max_}; }

ProcessStats& ProcessStats::instance() {
  static ProcessStats stats;
  return stats;
}

void ProcessStats::record_intercepted(const CallRecord& call) {
  std::lock_guard lock(mutex_);
  ++totals_.intercepted_calls;
  ++totals_.intercepted_by_shape[call.shape.index()];
  totals_.bytes_reduced += call.bytes;
  totals_.entries_reduced += call.entries;
  totals_.entries_dropped += call.dropped_entries;
  totals_.engine_time_us += call.latency_us;
  latency_.add(call.latency_us, reservoir_rng_);
  const unsigned size_class = call.bytes ? static_cast<unsigned>(std::bit_width(call.bytes) - 1) : 0;
  SizeClass& c = size_classes_[size_class];
  c.latency.add(call.latency_us, reservoir_rng_);
  if (call.bounded) {
    ++totals_.bounded_calls;
    deadline_.add(call.deadline_us, reservoir_rng_);
  }
  if (call.cut) {
    ++totals_.cut_calls;
    ++c.cut_calls;
  }
  if (call.fallback) ++totals_.fallback_calls;
  if (call.over_mpi) ++totals_.mpi_calls;
  if (call.stages.hierarchical) {
    StageStats& t = totals_.stage_totals;
    ++totals_.hierarchical_calls;
    t.host_reduce_us += call.stages.host_reduce_us, t.exchange_us += call.stages.exchange_us;
    t.host_gather_us += call.stages.host_gather_us, t.network_bytes += call.stages.network_bytes;
    t.shared_memory_bytes += call.stages.shared_memory_bytes;
  }
}

void ProcessStats::record_placement(const std::string& placement) {
  std::lock_guard lock(mutex_);
  totals_.placement = placement;
}

void ProcessStats::record_passthrough(PassReason reason, double elapsed_us, Collective collective) {
  std::lock_guard lock(mutex_);
  ++totals_.passthrough_calls;
  ++totals_.passthrough_by_collective[static_cast<std::size_t>(collective)];
  ++totals_.passthrough_by_reason[static_cast<std::size_t>(reason)];
  totals_.passthrough_time_us += elapsed_us;
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
  s.latency_us = latency_.summary();
  s.deadline_us = deadline_.summary();
  for (const auto& [size_class, c] : size_classes_)
    s.size_classes.push_back({size_class, c.latency.seen(), c.cut_calls, c.latency.summary()});
  return s;
}

void ProcessStats::reset() {
  std::lock_guard lock(mutex_);
  totals_ = {};
  latency_ = Reservoir{kMaxSamples};
  deadline_ = Reservoir{kMaxSamples};
  size_classes_.clear();
}

}  // namespace optireduce
