// optireduce-allreduce-bench: one contender's run for scripts/bench.sh.
//
// A plain MPI program that times float32 MPI_Allreduce(SUM) the way a user's job calls it and
// checks every result against the exact sum (tools/allreduce_bench_inputs.hpp). It is not linked
// to OptiReduce: run it as is to measure the MPI library, with LD_PRELOAD=liboptireduce.so to
// measure the engine. Each contender therefore runs in processes of its own, as a user runs it;
// comparing contenders (alternating runs, medians, ratios) is scripts/bench.sh's job.
//
//   latency: every call of each size timed one by one after a barrier
//   step:    a data-parallel step: one buffer per bucket, each reduced in place, in reverse order
//            of the list (DDP reduces the last layers' gradients first), back to back; the step is
//            timed after a barrier
//
// A timed iteration lasts until its slowest rank is done: the max over ranks is recorded. The
// barrier before it is the MPI's (--barrier mpi) or one in the host's shared memory (--barrier
// host, tools/host_barrier.hpp), which sends nothing over the network being measured.
// Warm-up iterations are run, checked and recorded but excluded from p50/p99. When the library is
// loaded, the kind of every call (none, exact, calibration, bounded, fallback) and its dropped
// entries come from its C API (tools/allreduce_bench_engine.hpp).
//
// Exit code: 0; 3 when a call failed or returned a wrong result (a call that must be exact is not
// exact, or a bounded call that reports no dropped entry is off by more than --tolerance); 2 on
// bad usage. The JSON is written in every case.
//
//   mpirun -np 4 optireduce-allreduce-bench latency --sizes 1M,16M --warmup 30 --iters 50 --json out.json
//   mpirun -np 4 optireduce-allreduce-bench step --buckets 0.25M,6.25M,6.25M,6.25M,5.5M --json out.json
#include <mpi.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cinttypes>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "allreduce_bench_engine.hpp"
#include "cli_errors.hpp"
#include "allreduce_bench_inputs.hpp"
#include "host_barrier.hpp"

namespace {

using allreduce_bench::CallInfo;
using allreduce_bench::Deviation;
using allreduce_bench::EngineProbe;

// Per-call flags, OR-ed over ranks.
enum Flag : int { kNotExact = 1, kBeyondTolerance = 2, kWrong = 4, kFailed = 8 };

struct Options {
  bool step = false;
  std::vector<std::uint64_t> sizes;  // latency: one entry per size; step: the buckets of one step
  int warmup = 30;
  int iters = 50;
  bool in_place = false;
  bool host_barrier = false;  // --barrier host
  double tolerance = 1e-3;
  std::uint64_t corrupt_call = 0;
  std::string json_path, label;
};

std::uint64_t parse_size(const std::string& s) {
  std::size_t pos = 0;
  const double v = std::stod(s, &pos);
  const std::string suffix = s.substr(pos);
  double mul = 1;
  if (suffix == "K" || suffix == "k") mul = 1024;
  else if (suffix == "M" || suffix == "m") mul = 1024.0 * 1024;
  else if (suffix == "G" || suffix == "g") mul = 1024.0 * 1024 * 1024;
  else if (!suffix.empty()) throw std::invalid_argument("bad size suffix in \"" + s + "\" (K, M, G: KiB, MiB, GiB)");
  const double bytes = v * mul;
  if (!(bytes >= 4) || bytes != std::floor(bytes) || static_cast<std::uint64_t>(bytes) % 4 != 0 ||
      bytes / 4 > 2147483647.0)
    throw std::invalid_argument("size \"" + s + "\" is not a positive multiple of 4 bytes below 8 GiB");
  return static_cast<std::uint64_t>(bytes);
}

std::string size_name(std::uint64_t n) {
  char b[32];
  if (n % (1u << 20) == 0) std::snprintf(b, sizeof b, "%" PRIu64 "M", n >> 20);
  else if (n % (1u << 10) == 0) std::snprintf(b, sizeof b, "%" PRIu64 "K", n >> 10);
  else std::snprintf(b, sizeof b, "%" PRIu64 "B", n);
  return b;
}

// Nearest rank: with few iterations p99 is the worst one, never an interpolation.
double percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const auto k = static_cast<std::size_t>(std::ceil(p / 100.0 * static_cast<double>(v.size())));
  return v[std::clamp<std::size_t>(k, 1, v.size()) - 1];
}

// JSON has no infinity: a result with a NaN or an infinite entry gets this huge error instead.
double finite(double x) { return std::isfinite(x) ? x : 1e300; }

template <typename T, typename F>
std::string json_list(const std::vector<T>& v, F&& item) {
  std::string out = "[";
  for (std::size_t i = 0; i < v.size(); ++i) out += (i ? ", " : "") + item(v[i]);
  return out + "]";
}
std::string num(double x) {
  char b[40];
  std::snprintf(b, sizeof b, "%.6g", finite(x));
  return b;
}
std::string num(std::uint64_t x) { return std::to_string(x); }

// What one entry (a size, or the step) produced, already combined over ranks.
struct EntryResult {
  std::string name;
  std::vector<std::uint64_t> buckets;
  std::vector<double> iteration_ms;  // warm-up first, then timed
  // Per iteration: from the last rank's start to the last rank's end. The barrier before an
  // iteration releases ranks at different times when its own messages are delayed (a lossy
  // network); iteration_ms then includes that skew, this does not. Meaningful where the ranks
  // share one clock (one machine, network namespaces included).
  std::vector<double> after_last_entry_ms;
  std::vector<double> start_s, end_s;  // this rank's, MPI_Wtime
  // Per call, in the order the calls ran (a step's buckets in reverse order).
  std::vector<double> call_ms, rel_error;
  std::vector<int> kind, flags;
  std::vector<std::uint64_t> bytes, entries, dropped;
  int calls_per_iteration = 1;
  bool failed = false;  // some call failed or was wrong
};

class Bench {
 public:
  // Throws std::runtime_error, on every rank alike, where --barrier host cannot be had.
  Bench(const Options& opt, MPI_Comm comm) : opt_(opt), comm_(comm) {
    MPI_Comm_rank(comm_, &rank_);
    MPI_Comm_size(comm_, &nranks_);
    if (opt_.host_barrier) host_barrier_ = std::make_unique<optireduce::tools::HostBarrier>(comm_);
  }
  int rank() const { return rank_; }
  int nranks() const { return nranks_; }
  const EngineProbe& probe() const { return probe_; }

  // Runs warm-up + timed iterations of one entry: the buckets reduced in reverse order, each in
  // its own buffer.
  EntryResult run(const std::string& name, const std::vector<std::uint64_t>& buckets) {
    const std::size_t nb = buckets.size();
    std::vector<std::vector<float>> send(nb), recv(nb);
    for (std::size_t b = 0; b < nb; ++b) {
      send[b].assign(buckets[b] / 4, 0.0f);
      if (!opt_.in_place) recv[b].assign(buckets[b] / 4, 0.0f);
    }
    EntryResult r;
    r.name = name;
    r.buckets = buckets;
    r.calls_per_iteration = static_cast<int>(nb);
    const int iterations = opt_.warmup + opt_.iters;
    std::vector<std::uint64_t> input_of(nb);
    for (int it = 0; it < iterations; ++it) {
      // Inputs are written before the barrier: filling is the user's compute, not the reduction.
      for (std::size_t b = 0; b < nb; ++b) {
        input_of[b] = next_input_++;
        allreduce_bench::fill_input(send[b].data(), send[b].size(), rank_, input_of[b]);
      }
      std::vector<int> rcs(nb);
      std::vector<CallInfo> infos(nb);
      std::vector<std::uint64_t> ordinal(nb);
      barrier();
      const double t0 = MPI_Wtime();
      double prev = t0;
      for (std::size_t k = 0; k < nb; ++k) {
        const std::size_t b = nb - 1 - k;
        const int count = static_cast<int>(send[b].size());
        rcs[b] = opt_.in_place ? MPI_Allreduce(MPI_IN_PLACE, send[b].data(), count, MPI_FLOAT, MPI_SUM, comm_)
                               : MPI_Allreduce(send[b].data(), recv[b].data(), count, MPI_FLOAT, MPI_SUM, comm_);
        const double t = MPI_Wtime();
        r.call_ms.push_back((t - prev) * 1e3);
        prev = t;
        infos[b] = probe_.after_call(comm_);
        ordinal[b] = ++calls_;
        // Test hook: one wrong value in one call's result, as a broken contender would return.
        if (ordinal[b] == opt_.corrupt_call && rank_ == 0) result(send, recv, b)[0] += 1.0f;
      }
      r.iteration_ms.push_back((prev - t0) * 1e3);
      r.start_s.push_back(t0);
      r.end_s.push_back(prev);
      for (std::size_t k = 0; k < nb; ++k) {
        const std::size_t b = nb - 1 - k;
        const float* out = result(send, recv, b);
        const Deviation d = allreduce_bench::deviation(out, send[b].size(), nranks_, input_of[b]);
        int flags = classify(rcs[b], infos[b], d);
        if (flags & kWrong) report_wrong(name, ordinal[b], input_of[b], infos[b], d, out, rcs[b]);
        r.kind.push_back(infos[b].kind);
        r.flags.push_back(flags);
        r.rel_error.push_back(finite(d.relative()));
        r.bytes.push_back(buckets[b]);
        r.entries.push_back(infos[b].entries);
        r.dropped.push_back(infos[b].dropped_entries);
      }
    }
    combine(r);
    return r;
  }

 private:
  void barrier() {
    if (!host_barrier_) {
      PMPI_Barrier(comm_);
      return;
    }
    try {
      host_barrier_->arrive();
    } catch (const std::exception& e) {
      std::fprintf(stderr, "optireduce-allreduce-bench: error: rank %d: %s\n", rank_, e.what());
      MPI_Abort(comm_, 1);
    }
  }

  static float* result(std::vector<std::vector<float>>& send, std::vector<std::vector<float>>& recv, std::size_t b) {
    return recv[b].empty() ? send[b].data() : recv[b].data();
  }

  int classify(int rc, const CallInfo& info, const Deviation& d) const {
    int flags = 0;
    if (!d.exact) flags |= kNotExact;
    if (d.relative() > opt_.tolerance) flags |= kBeyondTolerance;
    if (rc != MPI_SUCCESS) return flags | kFailed | kWrong;
    // Sums of small integers are exact in any order: whatever is not a bounded call (the MPI's
    // own, exact, calibration, fallback) must be exact to the last bit of every value. A bounded call that reports no
    // dropped entry may still differ by rounding (the Hadamard transform), not by more.
    if (info.kind != allreduce_bench::kBounded && !d.exact) flags |= kWrong;
    if (info.kind == allreduce_bench::kBounded && info.dropped_entries == 0 && (flags & kBeyondTolerance)) flags |= kWrong;
    return flags;
  }

  void report_wrong(const std::string& name, std::uint64_t call, std::uint64_t input, const CallInfo& info,
                    const Deviation& d, const float* out, int rc) {
    if (++wrong_reported_ > 5) return;
    if (rc != MPI_SUCCESS) {
      std::fprintf(stderr, "optireduce-allreduce-bench: error: rank %d, %s, call %" PRIu64 ": MPI_Allreduce returned %d\n",
                   rank_, name.c_str(), call, rc);
      return;
    }
    std::fprintf(stderr,
                 "optireduce-allreduce-bench: error: rank %d, %s, call %" PRIu64
                 " (kind %s, %" PRIu64 " dropped entries): wrong result: entry %zu is %.9g, exact %.9g; relative RMS error %.3g\n",
                 rank_, name.c_str(), call, allreduce_bench::kind_name(info.kind), info.dropped_entries, d.first_bad,
                 static_cast<double>(out[d.first_bad]),
                 static_cast<double>(allreduce_bench::exact_entry(d.first_bad, nranks_, input)), d.relative());
  }

  // Every figure over ranks: latencies and errors the worst rank's, entries and drops summed,
  // flags OR-ed. Kinds are agreed by the engine's ranks: rank 0's are kept.
  void combine(EntryResult& r) {
    auto max_d = [&](std::vector<double>& v) {
      PMPI_Allreduce(MPI_IN_PLACE, v.data(), static_cast<int>(v.size()), MPI_DOUBLE, MPI_MAX, comm_);
    };
    max_d(r.iteration_ms);
    max_d(r.start_s);
    max_d(r.end_s);
    for (std::size_t i = 0; i < r.start_s.size(); ++i) r.after_last_entry_ms.push_back((r.end_s[i] - r.start_s[i]) * 1e3);
    max_d(r.call_ms);
    max_d(r.rel_error);
    PMPI_Allreduce(MPI_IN_PLACE, r.flags.data(), static_cast<int>(r.flags.size()), MPI_INT, MPI_BOR, comm_);
    PMPI_Allreduce(MPI_IN_PLACE, r.entries.data(), static_cast<int>(r.entries.size()), MPI_UINT64_T, MPI_SUM, comm_);
    PMPI_Allreduce(MPI_IN_PLACE, r.dropped.data(), static_cast<int>(r.dropped.size()), MPI_UINT64_T, MPI_SUM, comm_);
    PMPI_Bcast(r.kind.data(), static_cast<int>(r.kind.size()), MPI_INT, 0, comm_);
    for (int f : r.flags) r.failed = r.failed || (f & kWrong);
  }

  const Options& opt_;
  MPI_Comm comm_;
  int rank_ = 0, nranks_ = 0;
  EngineProbe probe_;
  std::unique_ptr<optireduce::tools::HostBarrier> host_barrier_;
  std::uint64_t next_input_ = 0;  // input number of the next buffer filled (the "call" of the formula)
  std::uint64_t calls_ = 0;       // MPI_Allreduce calls so far, from 1
  int wrong_reported_ = 0;
};

// The JSON of one entry: the figures of the timed iterations, and every call.
std::string entry_json(const EntryResult& r, const Options& opt) {
  const std::size_t warm_calls = static_cast<std::size_t>(opt.warmup) * static_cast<std::size_t>(r.calls_per_iteration);
  std::vector<double> timed(r.iteration_ms.begin() + opt.warmup, r.iteration_ms.end());
  std::vector<double> timed_after(r.after_last_entry_ms.begin() + opt.warmup, r.after_last_entry_ms.end());
  std::uint64_t kinds_all[allreduce_bench::kKinds] = {}, kinds_timed[allreduce_bench::kKinds] = {};
  std::uint64_t entries = 0, dropped = 0, not_exact = 0, beyond = 0, wrong = 0, failed = 0;
  double worst = 0, worst_timed = 0, worst_call_dropped = 0;
  for (std::size_t c = 0; c < r.kind.size(); ++c) {
    const bool is_timed = c >= warm_calls;
    ++kinds_all[r.kind[c]];
    worst = std::max(worst, r.rel_error[c]);
    not_exact += (r.flags[c] & kNotExact) != 0;
    beyond += (r.flags[c] & kBeyondTolerance) != 0;
    wrong += (r.flags[c] & kWrong) != 0;
    failed += (r.flags[c] & kFailed) != 0;
    if (!is_timed) continue;
    ++kinds_timed[r.kind[c]];
    worst_timed = std::max(worst_timed, r.rel_error[c]);
    entries += r.entries[c];
    dropped += r.dropped[c];
    if (r.entries[c]) worst_call_dropped = std::max(worst_call_dropped, double(r.dropped[c]) / double(r.entries[c]));
  }
  auto kinds_json = [](const std::uint64_t* k) {
    std::string out = "{";
    for (int i = 0; i < allreduce_bench::kKinds; ++i)
      out += std::string(i ? ", " : "") + "\"" + allreduce_bench::kind_name(i) + "\": " + std::to_string(k[i]);
    return out + "}";
  };
  std::ostringstream o;
  o << "{\"name\": \"" << r.name << "\", \"buckets_bytes\": " << json_list(r.buckets, [](auto x) { return num(x); })
    << ", \"calls_per_iteration\": " << r.calls_per_iteration << ", \"warmup\": " << opt.warmup
    << ", \"iters\": " << opt.iters << ",\n   \"p50_ms\": " << num(percentile(timed, 50))
    << ", \"p99_ms\": " << num(percentile(timed, 99)) << ", \"max_ms\": " << num(percentile(timed, 100))
    << ", \"p50_after_last_entry_ms\": " << num(percentile(timed_after, 50))
    << ", \"p99_after_last_entry_ms\": " << num(percentile(timed_after, 99))
    << ",\n   \"check\": {\"calls\": " << r.kind.size() << ", \"not_exact\": " << not_exact
    << ", \"beyond_tolerance\": " << beyond << ", \"wrong\": " << wrong << ", \"failed\": " << failed
    << ", \"tolerance\": " << num(opt.tolerance) << ", \"max_rel_rms_error\": " << num(worst)
    << ", \"timed_max_rel_rms_error\": " << num(worst_timed) << "},\n   \"kinds_all\": " << kinds_json(kinds_all)
    << ", \"kinds_timed\": " << kinds_json(kinds_timed) << ",\n   \"timed_entries\": " << entries
    << ", \"timed_dropped_entries\": " << dropped
    << ", \"timed_dropped_fraction\": " << num(entries ? double(dropped) / double(entries) : 0.0)
    << ", \"timed_worst_call_dropped_fraction\": " << num(worst_call_dropped)
    << ",\n   \"iteration_ms\": " << json_list(r.iteration_ms, [](double x) { return num(x); })
    << ",\n   \"after_last_entry_ms\": " << json_list(r.after_last_entry_ms, [](double x) { return num(x); })
    << ",\n   \"calls\": {\"ms\": " << json_list(r.call_ms, [](double x) { return num(x); })
    << ", \"bytes\": " << json_list(r.bytes, [](auto x) { return num(x); })
    << ", \"kind\": " << json_list(r.kind, [](int k) { return std::string("\"") + allreduce_bench::kind_name(k) + "\""; })
    << ", \"entries\": " << json_list(r.entries, [](auto x) { return num(x); })
    << ", \"dropped\": " << json_list(r.dropped, [](auto x) { return num(x); })
    << ", \"rel_rms_error\": " << json_list(r.rel_error, [](double x) { return num(x); })
    << ", \"flags\": " << json_list(r.flags, [](int f) { return std::to_string(f); }) << "}}";
  return o.str();
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{
      "Times float32 MPI_Allreduce(SUM) as a user's job calls it and checks every result against the exact sum. "
      "One contender per run: as is for the MPI library, with LD_PRELOAD=liboptireduce.so for OptiReduce "
      "(scripts/bench.sh compares them).",
      "optireduce-allreduce-bench"};
  optireduce::tools::add_version_flag(app);
  app.require_subcommand(1);
  Options opt;
  std::string list;
  app.add_option("--json", opt.json_path, "write the figures and every call to this file (rank 0)");
  app.add_option("--label", opt.label, "free text copied into the JSON (the contender's name)");
  app.add_option("--warmup", opt.warmup, "untimed iterations first (calls, or steps): they cover calibration")
      ->check(CLI::Range(0, 1000000))
      ->capture_default_str();
  app.add_option("--iters", opt.iters, "timed iterations (calls, or steps)")->check(CLI::Range(1, 1000000))->capture_default_str();
  app.add_option("--tolerance", opt.tolerance,
                 "largest relative RMS error of a bounded call that reports no dropped entry (Hadamard rounding)")
      ->check(CLI::Range(0.0, 1e9))
      ->capture_default_str();
  app.add_option("--corrupt-result", opt.corrupt_call,
                 "testing: add 1 to one entry of the result of this call (counted from 1) on rank 0, to prove the "
                 "check fails");
  auto* lat = app.add_subcommand("latency", "every call of each size timed one by one after a barrier");
  lat->add_option("--sizes", list, "sizes in bytes, comma-separated, K/M/G = KiB/MiB/GiB, decimals allowed")->required();
  lat->add_flag("--in-place", opt.in_place, "MPI_IN_PLACE instead of separate send and receive buffers");
  auto* step = app.add_subcommand("step", "a data-parallel step: one in-place buffer per bucket, reduced in reverse order");
  step->add_option("--buckets", list, "bucket sizes in bytes, comma-separated, in model order (K/M/G, decimals allowed)")
      ->required();
  std::string barrier = "mpi";
  app.add_option("--barrier", barrier,
                 "what starts each iteration: mpi (MPI_Barrier) or host (shared memory of one host: sends nothing over "
                 "the network being measured; every rank on one host)")
      ->check(CLI::IsMember({"mpi", "host"}))
      ->capture_default_str();
  CLI11_PARSE(app, argc, argv);
  opt.host_barrier = barrier == "host";
  opt.step = step->parsed();
  if (opt.step) opt.in_place = true;
  try {
    std::stringstream ss(list);
    std::string item;
    while (std::getline(ss, item, ',')) opt.sizes.push_back(parse_size(item));
    if (opt.sizes.empty()) throw std::invalid_argument("empty list");
  } catch (const std::exception& e) {
    std::fprintf(stderr, "optireduce-allreduce-bench: %s: %s\n", opt.step ? "--buckets" : "--sizes", e.what());
    return 2;
  }

  MPI_Init(&argc, &argv);
  // A failed call is counted and reported with the others instead of ending the job at once.
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  std::optional<Bench> made;
  try {
    made.emplace(opt, MPI_COMM_WORLD);
  } catch (const std::exception& e) {
    int rank = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    if (rank == 0) std::fprintf(stderr, "optireduce-allreduce-bench: error: %s\n", e.what());
    MPI_Finalize();
    return 2;
  }
  Bench& bench = *made;
  const bool root = bench.rank() == 0;
  std::vector<EntryResult> results;
  if (opt.step) {
    results.push_back(bench.run("step", opt.sizes));
  } else {
    for (auto bytes : opt.sizes) results.push_back(bench.run(size_name(bytes), {bytes}));
  }
  // Process totals, for the reader of the JSON: engine calls and pass-throughs of rank 0.
  const auto totals = bench.probe().process_stats();

  bool failed = false;
  std::ostringstream js;
  js << "{\"tool\": \"optireduce-allreduce-bench\", \"mode\": \"" << (opt.step ? "step" : "latency")
     << "\", \"label\": \"" << opt.label << "\", \"ranks\": " << bench.nranks()
     << ", \"in_place\": " << (opt.in_place ? "true" : "false")
     << ", \"barrier\": \"" << (opt.host_barrier ? "host" : "mpi") << "\""
     << ", \"optireduce_loaded\": " << (bench.probe().loaded() ? "true" : "false") << ", \"library_version\": \""
     << bench.probe().version() << "\",\n \"rank0_process_stats\": {\"intercepted_calls\": " << totals.intercepted_calls
     << ", \"passthrough_calls\": " << totals.passthrough_calls << ", \"engines_created\": " << totals.engines_created
     << ", \"engine_failures\": " << totals.engine_failures << ", \"bounded_calls\": " << totals.bounded_calls
     << ", \"fallback_calls\": " << totals.fallback_calls << "},\n \"entries\": [\n  ";
  for (std::size_t i = 0; i < results.size(); ++i) {
    failed = failed || results[i].failed;
    js << (i ? ",\n  " : "") << entry_json(results[i], opt);
    if (root) {
      std::vector<double> timed(results[i].iteration_ms.begin() + opt.warmup, results[i].iteration_ms.end());
      std::fprintf(stderr, "optireduce-allreduce-bench: %s%s: p50 %.3f ms, p99 %.3f ms%s\n", opt.label.c_str(),
                   opt.label.empty() ? results[i].name.c_str() : (" " + results[i].name).c_str(), percentile(timed, 50),
                   percentile(timed, 99), results[i].failed ? " (WRONG RESULTS)" : "");
    }
  }
  js << "\n ],\n \"wrong_results\": " << (failed ? "true" : "false") << "}\n";

  int rc = failed ? 3 : 0;
  if (root && !opt.json_path.empty()) {
    std::ofstream f(opt.json_path, std::ios::trunc);
    f << js.str();
    f.close();
    if (!f) {
      std::fprintf(stderr, "optireduce-allreduce-bench: cannot write %s\n", opt.json_path.c_str());
      rc = rc ? rc : 1;
    }
  }
  if (root && failed) std::fprintf(stderr, "optireduce-allreduce-bench: error: some calls returned wrong results\n");
  MPI_Finalize();
  return rc;
}
