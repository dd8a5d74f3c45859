#include "json.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <sstream>

namespace optireduce::bench {

namespace {

template <typename T, typename F>
std::string json_list(const std::vector<T>& v, F&& item) {
  std::string out = "[";
  for (std::size_t i = 0; i < v.size(); ++i) out += (i ? ", " : "") + item(v[i]);
  return out + "]";
}
std::string num(double x) {
  char b[40];
  std::snprintf(b, sizeof b, "%.6g", std::isfinite(x) ? x : 1e300);
  return b;
}
std::string num(std::uint64_t x) { return std::to_string(x); }
std::string nums(const std::vector<double>& v) {
  return json_list(v, [](double x) { return num(x); });
}
std::string nums(const std::vector<std::uint64_t>& v) {
  return json_list(v, [](std::uint64_t x) { return num(x); });
}

std::string kinds_json(const std::uint64_t* k) {
  std::string out = "{";
  for (int i = 0; i < kKinds; ++i) out += std::string(i ? ", " : "") + "\"" + kind_name(i) + "\": " + std::to_string(k[i]);
  return out + "}";
}

// The JSON of one entry: the figures of the timed iterations, and every call.
std::string entry_json(const EntryResult& r, const Options& opt) {
  const std::size_t warm_calls = static_cast<std::size_t>(opt.warmup) * static_cast<std::size_t>(r.calls_per_iteration);
  const auto t = timed(r.iteration_ms, opt), t_after = timed(r.after_last_entry_ms, opt), t_comm = timed(r.comm_ms, opt);
  std::uint64_t kinds_all[kKinds] = {}, kinds_timed[kKinds] = {};
  std::uint64_t entries = 0, dropped = 0, not_exact = 0, beyond = 0, wrong = 0, failed = 0, diverged = 0;
  double worst = 0, worst_timed = 0, worst_call_dropped = 0;
  for (std::size_t c = 0; c < r.kind.size(); ++c) {
    const bool is_timed = c >= warm_calls;
    ++kinds_all[r.kind[c]];
    worst = std::max(worst, r.rel_error[c]);
    not_exact += (r.flags[c] & kNotExact) != 0;
    beyond += (r.flags[c] & kBeyondTolerance) != 0;
    wrong += (r.flags[c] & kWrong) != 0;
    failed += (r.flags[c] & kFailed) != 0;
    diverged += (r.flags[c] & kDiverged) != 0;
    if (!is_timed) continue;
    ++kinds_timed[r.kind[c]];
    worst_timed = std::max(worst_timed, r.rel_error[c]);
    entries += r.entries[c];
    dropped += r.dropped[c];
    if (r.entries[c]) worst_call_dropped = std::max(worst_call_dropped, double(r.dropped[c]) / double(r.entries[c]));
  }
  const Entry& e = r.entry;
  std::ostringstream o;
  o << "{\"name\": \"" << e.name << "\", \"buckets_bytes\": " << nums(e.buckets)
    << ", \"calls_per_iteration\": " << r.calls_per_iteration << ", \"warmup\": " << opt.warmup
    << ", \"iters\": " << opt.iters << ", \"warmup_calls_per_size_class\": " << e.warmup_calls
    << ", \"preparatory_calls\": " << r.preparatory_calls;
  if (!e.model.empty())
    o << ",\n   \"model\": {\"name\": \"" << e.model << "\", \"params\": " << e.params << ", \"scale\": " << num(e.scale)
      << ", \"full_bucket_count\": " << e.full_buckets << "}";
  o << ", \"compute_ms\": " << num(e.compute_s * 1e3) << ",\n   \"p50_ms\": " << num(percentile(t, 50))
    << ", \"p99_ms\": " << num(percentile(t, 99)) << ", \"max_ms\": " << num(percentile(t, 100))
    << ", \"p50_comm_ms\": " << num(percentile(t_comm, 50))
    << ", \"p50_after_last_entry_ms\": " << num(percentile(t_after, 50))
    << ", \"p99_after_last_entry_ms\": " << num(percentile(t_after, 99))
    << ",\n   \"check\": {\"checked\": " << (opt.check ? "true" : "false") << ", \"calls\": " << r.kind.size()
    << ", \"not_exact\": " << not_exact << ", \"beyond_tolerance\": " << beyond << ", \"wrong\": " << wrong
    << ", \"failed\": " << failed << ", \"diverged\": " << diverged << ", \"tolerance\": " << num(opt.tolerance)
    << ", \"max_rel_rms_error\": " << num(worst) << ", \"timed_max_rel_rms_error\": " << num(worst_timed)
    << "},\n   \"kinds_all\": " << kinds_json(kinds_all) << ", \"kinds_timed\": " << kinds_json(kinds_timed)
    << ",\n   \"timed_entries\": " << entries << ", \"timed_dropped_entries\": " << dropped
    << ", \"timed_dropped_fraction\": " << num(entries ? double(dropped) / double(entries) : 0.0)
    << ", \"timed_worst_call_dropped_fraction\": " << num(worst_call_dropped)
    << ",\n   \"iteration_ms\": " << nums(r.iteration_ms) << ",\n   \"comm_ms\": " << nums(r.comm_ms)
    << ",\n   \"after_last_entry_ms\": " << nums(r.after_last_entry_ms) << ",\n   \"calls\": {\"ms\": " << nums(r.call_ms)
    << ", \"bytes\": " << nums(r.bytes)
    << ", \"kind\": " << json_list(r.kind, [](int k) { return std::string("\"") + kind_name(k) + "\""; })
    << ", \"entries\": " << nums(r.entries) << ", \"dropped\": " << nums(r.dropped)
    << ", \"rel_rms_error\": " << nums(r.rel_error)
    << ", \"flags\": " << json_list(r.flags, [](int f) { return std::to_string(f); }) << "}}";
  return o.str();
}

}  // namespace

double percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const auto k = static_cast<std::size_t>(std::ceil(p / 100.0 * static_cast<double>(v.size())));
  return v[std::clamp<std::size_t>(k, 1, v.size()) - 1];
}

std::vector<double> timed(const std::vector<double>& per_iteration, const Options& opt) {
  const auto skip = std::min<std::size_t>(per_iteration.size(), static_cast<std::size_t>(opt.warmup));
  return {per_iteration.begin() + static_cast<long>(skip), per_iteration.end()};
}

std::string run_json(const Options& opt, int nranks, const EngineProbe& probe, double peak_rss_mib,
                     const std::vector<EntryResult>& results) {
  const auto totals = probe.process_stats();
  bool failed = false;
  std::ostringstream js;
  js << "{\"tool\": \"optireduce-bench\", \"mode\": \"" << opt.mode << "\", \"label\": \"" << opt.label
     << "\", \"format\": \"" << format_name(opt.format) << "\", \"collective\": \"" << collective_name(opt.collective)
     << "\", \"ranks\": " << nranks << ", \"in_place\": " << (opt.in_place ? "true" : "false")
     << ", \"barrier\": \"" << (opt.host_barrier ? "host" : "mpi") << "\""
     << ", \"optireduce_loaded\": " << (probe.loaded() ? "true" : "false") << ", \"library_version\": \""
     << probe.version() << "\", \"peak_rss_mib\": " << num(peak_rss_mib)
     << ",\n \"rank0_process_stats\": {\"intercepted_calls\": " << totals.intercepted_calls
     << ", \"passthrough_calls\": " << totals.passthrough_calls << ", \"engines_created\": " << totals.engines_created
     << ", \"engine_failures\": " << totals.engine_failures << ", \"bounded_calls\": " << totals.bounded_calls
     << ", \"fallback_calls\": " << totals.fallback_calls << "},\n \"entries\": [\n  ";
  for (std::size_t i = 0; i < results.size(); ++i) {
    failed = failed || results[i].failed;
    js << (i ? ",\n  " : "") << entry_json(results[i], opt);
  }
  js << "\n ],\n \"wrong_results\": " << (failed ? "true" : "false") << "}\n";
  return js.str();
}

}  // namespace optireduce::bench
