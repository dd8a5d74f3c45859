// optireduce-bench: times one float32 sum reduction through PMPI_Allreduce (the MPI library) and
// through MPI_Allreduce (the OptiReduce engine, via the wrapper) in the same run, interleaved, and
// checks that both give the same bits.
//
//   mpirun -np 4 optireduce-bench --sizes 1M,16M --iters 10 --json bench.json
#include <mpi.h>
#include <sys/resource.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cerrno>
#include <cinttypes>
#include <climits>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <functional>
#include <string>
#include <vector>

#include "cli_errors.hpp"
#include "optireduce/engine/config/config.hpp"
#include "optireduce/optireduce.h"

namespace {

struct Options {
  std::vector<std::uint64_t> sizes{1u << 20, 16u << 20, 64u << 20};
  int iters = 20;
  int warmup = 3;
  std::string json_path;
  std::string comm = "world";
};

struct Latency {
  double p50_ms = 0, p99_ms = 0;
};

struct SizeResult {
  std::uint64_t bytes = 0;
  Latency pmpi, engine;
  std::uint64_t intercepted_min = 0;  // engine calls of this size, fewest over ranks
  std::uint64_t entries_dropped = 0;  // summed over ranks
  bool results_match = true;
};

std::string format_bytes(std::uint64_t n) {
  if (n >= (1u << 30) && n % (1u << 30) == 0) return std::to_string(n >> 30) + "G";
  if (n >= (1u << 20) && n % (1u << 20) == 0) return std::to_string(n >> 20) + "M";
  if (n >= (1u << 10) && n % (1u << 10) == 0) return std::to_string(n >> 10) + "K";
  return std::to_string(n) + "B";
}

// Nearest-rank percentile: with few iterations p99 is the worst call, never an interpolation.
double percentile(std::vector<double> v, double p) {
  std::sort(v.begin(), v.end());
  const auto rank = static_cast<std::size_t>(std::ceil(p / 100.0 * static_cast<double>(v.size())));
  return v[std::min(v.size() - 1, rank == 0 ? 0 : rank - 1)];
}

double peak_rss_mib() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return static_cast<double>(usage.ru_maxrss) / 1024.0;  // ru_maxrss is in KiB on Linux
}

optireduce_process_stats process_stats() {
  optireduce_process_stats s{};
  optireduce_get_process_stats(&s);
  return s;
}

// Every collective decision goes through PMPI so the bench's own bookkeeping is never intercepted
// nor counted as a pass-through.
double max_over_ranks(double v, MPI_Comm comm) {
  PMPI_Allreduce(MPI_IN_PLACE, &v, 1, MPI_DOUBLE, MPI_MAX, comm);
  return v;
}
std::uint64_t reduce_u64(std::uint64_t v, MPI_Op op, MPI_Comm comm) {
  PMPI_Allreduce(MPI_IN_PLACE, &v, 1, MPI_UINT64_T, op, comm);
  return v;
}
bool all_ranks(bool v, MPI_Comm comm) {
  int flag = v ? 1 : 0;
  PMPI_Allreduce(MPI_IN_PLACE, &flag, 1, MPI_INT, MPI_MIN, comm);
  return flag != 0;
}

CLI::Validator byte_size_validator() {
  return CLI::Validator(
      [](std::string& text) -> std::string {
        std::uint64_t n = 0;
        if (!optireduce::parse_byte_count(text, n))
          return "\"" + text + "\" is not a byte count (e.g. 4096, 64K, 16M, 1G)";
        if (n == 0 || n % sizeof(float) != 0) return "\"" + text + "\" must be a positive multiple of 4 bytes";
        // MPI_Allreduce takes an int count.
        if (n / sizeof(float) > static_cast<std::uint64_t>(INT_MAX)) return "\"" + text + "\" is above 8G - 4 bytes";
        text = std::to_string(n);  // CLI11 then converts the plain number
        return {};
      },
      "SIZE[K|M|G]");
}

// Parses on every rank; only rank 0 prints. Returns -1 to go on, otherwise the exit code.
int parse_options(int argc, char** argv, int rank, Options& opt) {
  CLI::App app{
      "Times float32 MPI_Allreduce(SUM) through PMPI (the MPI library) and through the "
      "OptiReduce engine, interleaved in one run, and checks both agree bitwise.",
      "optireduce-bench"};
  app.add_option("--sizes", opt.sizes, "message sizes in bytes, comma-separated, K/M/G = KiB/MiB/GiB")
      ->delimiter(',')
      ->transform(byte_size_validator())
      ->default_str("1M,16M,64M");
  app.add_option("--iters", opt.iters, "timed calls per size and implementation")
      ->check(CLI::Range(1, 1000000))
      ->capture_default_str();
  app.add_option("--warmup", opt.warmup, "untimed calls per size and implementation first")
      ->check(CLI::Range(0, 1000000))
      ->capture_default_str();
  app.add_option("--json", opt.json_path, "also write the figures to this file (rank 0)");
  app.add_option("--comm", opt.comm, "communicator to reduce on")
      ->check(CLI::IsMember({"world"}))
      ->capture_default_str();
  optireduce::tools::add_version_flag(app);
  optireduce::tools::use_single_line_errors(app);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return optireduce::tools::exit_code(app, e, rank == 0);
  }
  return -1;
}

class Bench {
 public:
  Bench(const Options& opt, MPI_Comm comm) : opt_(opt), comm_(comm) {
    MPI_Comm_rank(comm_, &rank_);
    MPI_Comm_size(comm_, &nranks_);
    const std::uint64_t max_bytes = *std::max_element(opt_.sizes.begin(), opt_.sizes.end());
    const std::size_t n = max_bytes / sizeof(float);
    // Small integers: every partial sum is exact, so any summation order gives the same bits.
    send_.resize(n);
    for (std::size_t i = 0; i < n; ++i)
      send_[i] = static_cast<float>(static_cast<int>((i * 7 + static_cast<std::size_t>(rank_) * 3) % 33) - 16);
    // Touched now, so both RSS figures include the bench's own buffers.
    pmpi_out_.assign(n, 0.0f);
    engine_out_.assign(n, 0.0f);
  }

  int rank() const { return rank_; }
  int nranks() const { return nranks_; }

  void pmpi(std::uint64_t bytes) {
    PMPI_Allreduce(send_.data(), pmpi_out_.data(), count(bytes), MPI_FLOAT, MPI_SUM, comm_);
  }
  void engine(std::uint64_t bytes) {
    MPI_Allreduce(send_.data(), engine_out_.data(), count(bytes), MPI_FLOAT, MPI_SUM, comm_);
  }

  // Peak RSS (max over ranks) after running one implementation over every size. PMPI goes first so
  // the MPI library's own buffers are already in the first figure; the difference is what the
  // engine adds (its transport, staging buffers and engine state).
  double peak_after(const std::function<void(std::uint64_t)>& call) {
    for (auto bytes : opt_.sizes) call(bytes);
    PMPI_Barrier(comm_);
    return max_over_ranks(peak_rss_mib(), comm_);
  }

  // One PMPI call and one engine call, then a bitwise comparison, agreed over ranks.
  bool results_match(std::uint64_t bytes) {
    pmpi(bytes);
    engine(bytes);
    const std::size_t n = static_cast<std::size_t>(count(bytes));
    bool same = std::memcmp(pmpi_out_.data(), engine_out_.data(), n * sizeof(float)) == 0;
    if (!same) {
      std::size_t i = 0;
      while (i < n && std::memcmp(&pmpi_out_[i], &engine_out_[i], sizeof(float)) == 0) ++i;
      std::fprintf(
          stderr,
          "optireduce-bench: error: %s: results differ on rank %d, first at element %zu: engine %.9g, pmpi %.9g\n",
          format_bytes(bytes).c_str(), rank_, i, static_cast<double>(engine_out_[i]),
          static_cast<double>(pmpi_out_[i]));
    }
    return all_ranks(same, comm_);
  }

  SizeResult measure(std::uint64_t bytes) {
    SizeResult r;
    r.bytes = bytes;
    const auto before = process_stats();
    r.results_match = results_match(bytes);
    for (int i = 0; i < opt_.warmup; ++i) {
      pmpi(bytes);
      engine(bytes);
    }
    std::vector<double> t_pmpi, t_engine;
    for (int i = 0; i < opt_.iters; ++i) {
      // Alternating who goes first cancels any advantage of running right after the other
      // (warm caches, a peer still finishing the previous call).
      if (i % 2 == 0) {
        t_pmpi.push_back(timed([&] { pmpi(bytes); }));
        t_engine.push_back(timed([&] { engine(bytes); }));
      } else {
        t_engine.push_back(timed([&] { engine(bytes); }));
        t_pmpi.push_back(timed([&] { pmpi(bytes); }));
      }
    }
    // A call lasts until its slowest rank is done: per iteration, the max over ranks.
    PMPI_Allreduce(MPI_IN_PLACE, t_pmpi.data(), opt_.iters, MPI_DOUBLE, MPI_MAX, comm_);
    PMPI_Allreduce(MPI_IN_PLACE, t_engine.data(), opt_.iters, MPI_DOUBLE, MPI_MAX, comm_);
    r.pmpi = {percentile(t_pmpi, 50) * 1e3, percentile(t_pmpi, 99) * 1e3};
    r.engine = {percentile(t_engine, 50) * 1e3, percentile(t_engine, 99) * 1e3};
    const auto after = process_stats();
    r.intercepted_min = reduce_u64(after.intercepted_calls - before.intercepted_calls, MPI_MIN, comm_);
    r.entries_dropped = reduce_u64(after.entries_dropped - before.entries_dropped, MPI_SUM, comm_);
    return r;
  }

 private:
  int count(std::uint64_t bytes) const { return static_cast<int>(bytes / sizeof(float)); }

  double timed(const std::function<void()>& call) {
    PMPI_Barrier(comm_);
    const double t0 = MPI_Wtime();
    call();
    return MPI_Wtime() - t0;
  }

  const Options& opt_;
  MPI_Comm comm_;
  int rank_ = 0, nranks_ = 0;
  std::vector<float> send_, pmpi_out_, engine_out_;
};

struct RssResult {
  double pmpi_peak_mib = 0, engine_peak_mib = 0;
  double extra_mib() const { return engine_peak_mib - pmpi_peak_mib; }
};

void print_table(const std::vector<SizeResult>& results) {
  std::printf("%8s %12s %12s %12s %12s %10s %10s %8s\n", "size", "pmpi p50", "pmpi p99", "engine p50", "engine p99",
              "p50 ratio", "p99 ratio", "engine");
  std::printf("%8s %12s %12s %12s %12s %10s %10s %8s\n", "", "(ms)", "(ms)", "(ms)", "(ms)", "eng/pmpi", "eng/pmpi",
              "calls");
  for (const auto& r : results)
    std::printf("%8s %12.3f %12.3f %12.3f %12.3f %10.2f %10.2f %8" PRIu64 "%s\n", format_bytes(r.bytes).c_str(),
                r.pmpi.p50_ms, r.pmpi.p99_ms, r.engine.p50_ms, r.engine.p99_ms, r.engine.p50_ms / r.pmpi.p50_ms,
                r.engine.p99_ms / r.pmpi.p99_ms, r.intercepted_min,
                r.intercepted_min == 0 ? "  <- NOT the engine" : "");
}

std::string render_json(const Options& opt, int nranks, const std::vector<SizeResult>& results, const RssResult& rss,
                        const optireduce_process_stats& totals) {
  std::string out;
  char buf[512];
  std::snprintf(buf, sizeof buf,
                "{\n  \"ranks\": %d, \"iters\": %d, \"warmup\": %d, \"library_version\": \"%s\",\n  \"sizes\": [\n",
                nranks, opt.iters, opt.warmup, optireduce_version());
  out += buf;
  for (std::size_t i = 0; i < results.size(); ++i) {
    const auto& r = results[i];
    std::snprintf(buf, sizeof buf,
                  "    {\"bytes\": %" PRIu64
                  ", \"pmpi\": {\"p50_ms\": %.6g, \"p99_ms\": %.6g}, "
                  "\"engine\": {\"p50_ms\": %.6g, \"p99_ms\": %.6g}, \"ratio_p50\": %.6g, \"ratio_p99\": %.6g, "
                  "\"engine_calls_min_over_ranks\": %" PRIu64 ", \"entries_dropped\": %" PRIu64
                  ", \"results_match\": %s}%s\n",
                  r.bytes, r.pmpi.p50_ms, r.pmpi.p99_ms, r.engine.p50_ms, r.engine.p99_ms,
                  r.engine.p50_ms / r.pmpi.p50_ms, r.engine.p99_ms / r.pmpi.p99_ms, r.intercepted_min,
                  r.entries_dropped, r.results_match ? "true" : "false", i + 1 < results.size() ? "," : "");
    out += buf;
  }
  std::snprintf(buf, sizeof buf,
                "  ],\n  \"rss_mib\": {\"pmpi_peak\": %.2f, \"engine_peak\": %.2f, \"engine_extra\": %.2f},\n"
                "  \"rank0_stats\": {\"intercepted_calls\": %" PRIu64 ", \"passthrough_calls\": %" PRIu64
                ", \"engines_created\": %" PRIu64 ", \"engine_failures\": %" PRIu64 "}\n}\n",
                rss.pmpi_peak_mib, rss.engine_peak_mib, rss.extra_mib(), totals.intercepted_calls,
                totals.passthrough_calls, totals.engines_created, totals.engine_failures);
  out += buf;
  return out;
}

// Says loudly why the engine column may be Open MPI too.
void warn_if_engine_idle(const std::vector<SizeResult>& results, const optireduce_process_stats& totals, int nranks) {
  const auto cfg = optireduce::parse_config(optireduce::process_environment());
  for (const auto& r : results) {
    if (r.intercepted_min != 0) continue;
    std::fprintf(stderr,
                 "\n*** WARNING: the engine did not run for %s on every rank: its column timed PMPI_Allreduce. ***\n",
                 format_bytes(r.bytes).c_str());
    if (nranks < 2)
      std::fprintf(stderr, "***   a communicator of one rank is never eligible: run with 2 or more ranks.\n");
    else if (!cfg.ok())
      std::fprintf(stderr, "***   configuration error: %s\n", cfg.error.c_str());
    else if (cfg.config.mode == optireduce::Mode::off)
      std::fprintf(stderr, "***   OPTIREDUCE_MODE=off sends every call to PMPI_Allreduce.\n");
    else if (r.bytes < cfg.config.min_bytes)
      std::fprintf(stderr, "***   %s is below OPTIREDUCE_MIN_BYTES=%" PRIu64 " bytes.\n", format_bytes(r.bytes).c_str(),
                   static_cast<std::uint64_t>(cfg.config.min_bytes));
    if (totals.engine_failures != 0)
      std::fprintf(stderr, "***   engine creation failed on %" PRIu64 " communicator(s) of rank 0 (see its log).\n",
                   static_cast<std::uint64_t>(totals.engine_failures));
  }
}

int run(const Options& opt) {
  Bench bench(opt, MPI_COMM_WORLD);
  const bool root = bench.rank() == 0;

  // Open the output before spending minutes measuring.
  std::ofstream json;
  int json_ok = 1;
  if (root && !opt.json_path.empty()) {
    json.open(opt.json_path, std::ios::trunc);
    json_ok = json ? 1 : 0;
    if (!json_ok)
      std::fprintf(stderr, "optireduce-bench: error: cannot write --json %s: %s\n", opt.json_path.c_str(),
                   std::strerror(errno));
  }
  PMPI_Bcast(&json_ok, 1, MPI_INT, 0, MPI_COMM_WORLD);
  if (!json_ok) return 1;

  if (root) {
    std::printf("optireduce-bench: library %s, %d ranks, %d iterations (+%d warm-up) per size, float32 sum\n",
                optireduce_version(), bench.nranks(), opt.iters, opt.warmup);
    std::fflush(stdout);
  }
  RssResult rss;
  rss.pmpi_peak_mib = bench.peak_after([&](std::uint64_t b) { bench.pmpi(b); });
  rss.engine_peak_mib = bench.peak_after([&](std::uint64_t b) { bench.engine(b); });

  std::vector<SizeResult> results;
  bool all_match = true;
  for (auto bytes : opt.sizes) {
    results.push_back(bench.measure(bytes));
    all_match = all_match && results.back().results_match;
  }
  const auto totals = process_stats();
  if (!root) return all_match ? 0 : 1;

  std::printf("\n");
  print_table(results);
  std::printf(
      "\npeak RSS per rank (max over ranks): PMPI only %.1f MiB, with the engine %.1f MiB: the engine adds %.1f MiB\n",
      rss.pmpi_peak_mib, rss.engine_peak_mib, rss.extra_mib());
  std::printf("engine on rank 0: %" PRIu64 " intercepted calls, %" PRIu64 " passed through, %" PRIu64
              " engine(s), %" PRIu64 " failure(s), dropped fraction %.3g\n",
              static_cast<std::uint64_t>(totals.intercepted_calls),
              static_cast<std::uint64_t>(totals.passthrough_calls), static_cast<std::uint64_t>(totals.engines_created),
              static_cast<std::uint64_t>(totals.engine_failures), totals.dropped_fraction);
  for (const auto& r : results)
    if (!r.results_match)
      std::printf("ERROR: %s: engine and PMPI results differ (see stderr)\n", format_bytes(r.bytes).c_str());
  std::fflush(stdout);
  warn_if_engine_idle(results, totals, bench.nranks());
  if (json.is_open()) {
    json << render_json(opt, bench.nranks(), results, rss, totals);
    json.close();
    if (!json) {
      std::fprintf(stderr, "optireduce-bench: error: writing %s failed\n", opt.json_path.c_str());
      return 1;
    }
    std::printf("figures written to %s\n", opt.json_path.c_str());
  }
  return all_match ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  Options opt;
  int rc = parse_options(argc, argv, rank, opt);
  if (rc < 0) rc = run(opt);
  MPI_Finalize();
  return rc;
}
