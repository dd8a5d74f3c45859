#include "runtime.hpp"

#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <mutex>

#include "optireduce/engine/call_trace.hpp"
#include "comm_engines.hpp"
#include "optireduce/engine/log.hpp"
#include "optireduce/optireduce.h"
#include "optireduce/engine/report.hpp"
#include "optireduce/engine/stats.hpp"

namespace optireduce::pmpi {
namespace {

std::mutex g_lifecycle;
bool g_initialized = false;
bool g_finalized = false;
std::atomic<bool> g_active{false};
std::atomic<bool> g_initialized_flag{false};
CallTrace g_trace;
int g_world_rank = 0;  // the trace names ranks of MPI_COMM_WORLD
std::mutex g_trace_mutex;
Config g_config;
thread_local int t_nesting = 0;

std::uint64_t fnv1a(const std::string& text) {
  std::uint64_t h = 1469598103934665603ull;
  for (unsigned char c : text) h = (h ^ c) * 1099511628211ull;
  return h;
}

struct Agreement {
  int ok;
  int pad;
  std::uint64_t settings;
};

[[noreturn]] void end_job() {
  // Every rank took the same decision from the same all-gather, so all of them leave here.
  std::fflush(stderr);
  PMPI_Finalize();
  _exit(1);
}

// Gathers variable-length strings to rank 0 of MPI_COMM_WORLD.
std::vector<std::string> gather_to_root(const std::string& mine, int rank, int size) {
  int length = static_cast<int>(mine.size());
  std::vector<int> lengths(rank == 0 ? size : 0), displs(rank == 0 ? size : 0);
  PMPI_Gather(&length, 1, MPI_INT, lengths.data(), 1, MPI_INT, 0, MPI_COMM_WORLD);
  std::vector<char> all;
  if (rank == 0) {
    int total = 0;
    for (int r = 0; r < size; ++r) displs[r] = total, total += lengths[r];
    all.resize(static_cast<std::size_t>(total));
  }
  PMPI_Gatherv(mine.data(), length, MPI_CHAR, all.data(), lengths.data(), displs.data(), MPI_CHAR, 0, MPI_COMM_WORLD);
  std::vector<std::string> out;
  if (rank == 0)
    for (int r = 0; r < size; ++r) out.emplace_back(all.data() + displs[r], static_cast<std::size_t>(lengths[r]));
  return out;
}

void write_report(int rank, int size) {
  // Rank 0 writes, so its settings decide for everyone (report path and log level may differ per
  // rank, and every rank must take part in the same gathers).
  int wanted = (g_config.report_path.empty() ? 0 : 1) | (log_enabled(LogLevel::info) ? 2 : 0);
  PMPI_Bcast(&wanted, 1, MPI_INT, 0, MPI_COMM_WORLD);
  const bool want_file = wanted & 1, want_summary = wanted & 2;
  if (!wanted) return;
  RankReport r;
  r.rank = rank;
  char host[256] = {};
  gethostname(host, sizeof host - 1);
  r.host = host;
  r.stats = ProcessStats::instance().snapshot();
  r.topology = read_topology();
  const EngineHistory h = engine_history();
  for (const auto& t : h.transports) r.transports += (r.transports.empty() ? "" : ";") + t;
  r.engine_buffer_bytes = h.peak_buffer_bytes;
  r.largest_call_bytes = h.largest_call_bytes;
  r.rejected_messages = h.rejected_messages;
  r.divergent_calls = h.divergent_calls;
  r.fallbacks = h.fallbacks;
  r.injected_drops = h.injected_drops;
  r.fill_agreement_incomplete = h.fill_agreement_incomplete;
  r.rejected_by_reason = h.rejected_by_reason;
  r.transport_counters = h.transport_counters;

  // The summary needs every rank's figures; the file needs every rank's object.
  const double figures[7] = {double(r.stats.intercepted_calls), double(r.stats.passthrough_calls), double(r.stats.bytes_reduced),
                             double(r.stats.entries_reduced), double(r.stats.entries_dropped), r.stats.latency_us.p50,
                             r.stats.latency_us.p99};
  std::vector<double> all_figures(rank == 0 ? 7 * static_cast<std::size_t>(size) : 0);
  PMPI_Gather(figures, 7, MPI_DOUBLE, all_figures.data(), 7, MPI_DOUBLE, 0, MPI_COMM_WORLD);
  const auto objects = want_file ? gather_to_root(render_rank(r), rank, size) : std::vector<std::string>{};
  if (rank != 0) return;
  if (want_summary) {
    std::vector<RankReport> ranks(static_cast<std::size_t>(size));
    for (int i = 0; i < size; ++i) {
      const double* f = &all_figures[7 * static_cast<std::size_t>(i)];
      auto& s = ranks[i].stats;
      s.intercepted_calls = static_cast<std::uint64_t>(f[0]);
      s.passthrough_calls = static_cast<std::uint64_t>(f[1]);
      s.bytes_reduced = static_cast<std::uint64_t>(f[2]);
      s.entries_reduced = static_cast<std::uint64_t>(f[3]);
      s.entries_dropped = static_cast<std::uint64_t>(f[4]);
      s.latency_us.p50 = f[5];
      s.latency_us.p99 = f[6];
    }
    OR_LOG(info, "%s", render_summary(ranks).c_str());
  }
  if (want_file) {
    std::ofstream out(g_config.report_path, std::ios::trunc);
    out << render_report(g_config, objects);
    if (!out) OR_LOG(warn, "cannot write the report to OPTIREDUCE_REPORT=\"%s\": %s", g_config.report_path.c_str(), std::strerror(errno));
  }
  if (want_file && want_summary) OR_LOG(info, "report of %d ranks written to %s", size, g_config.report_path.c_str());
}

}  // namespace

NestedCallGuard::NestedCallGuard() { ++t_nesting; }
NestedCallGuard::~NestedCallGuard() { --t_nesting; }
bool NestedCallGuard::nested() { return t_nesting > 0; }

bool active() { return g_active.load(std::memory_order_acquire); }
bool initialized() { return g_initialized_flag.load(std::memory_order_acquire); }

void trace_call(const CallStats& call) {
  if (!g_trace.enabled()) return;
  std::lock_guard lock(g_trace_mutex);
  g_trace.write(g_world_rank, call);
}
const Config& config() { return g_config; }

void after_init() {
  std::lock_guard lock(g_lifecycle);
  if (g_initialized) return;
  g_initialized = true;
  int rank = 0, size = 1;
  PMPI_Comm_rank(MPI_COMM_WORLD, &rank);
  PMPI_Comm_size(MPI_COMM_WORLD, &size);
  set_log_rank(rank);
  g_world_rank = rank;

  ConfigResult parsed = parse_config(process_environment());
  const std::string settings = parsed.config.agreement_text() + ";version=" + optireduce_version();
  Agreement mine{parsed.ok() ? 1 : 0, 0, fnv1a(settings)};
  std::vector<Agreement> all(static_cast<std::size_t>(size));
  PMPI_Allgather(&mine, sizeof mine, MPI_BYTE, all.data(), sizeof mine, MPI_BYTE, MPI_COMM_WORLD);
  int first_bad = -1, first_different = -1;
  for (int r = 0; r < size; ++r) {
    if (!all[r].ok && first_bad < 0) first_bad = r;
    if (all[r].ok && all[r].settings != all[0].settings && first_different < 0) first_different = r;
  }
  if (first_bad >= 0) {
    if (rank == first_bad) std::fprintf(stderr, "optireduce: %s\n", parsed.error.c_str());
    end_job();
  }
  if (first_different >= 0 && all[0].ok) {
    if (rank == first_different)
      std::fprintf(stderr, "optireduce: settings differ between ranks: rank %d has \"%s\", which is not rank 0's; "
                   "export the same OPTIREDUCE_* values to every rank\n", rank, settings.c_str());
    end_job();
  }
  g_config = parsed.config;
  set_log_level(g_config.log_level);
  setup_comm_engines();
  if (!g_config.trace_path.empty() && !g_trace.open(g_config.trace_path))
    OR_LOG(warn, "cannot open OPTIREDUCE_TRACE=\"%s\": %s; tracing is off", g_config.trace_path.c_str(), std::strerror(errno));
  g_initialized_flag.store(true, std::memory_order_release);
  // Off still interposes (so a communicator can opt in with MPI_Comm_set_info) but by default
  // every call passes through.
  g_active.store(true, std::memory_order_release);
  OR_LOG(debug, "initialised: %s", settings.c_str());
}

void before_finalize() {
  std::lock_guard lock(g_lifecycle);
  if (!g_initialized || g_finalized) return;
  g_finalized = true;
  g_active.store(false, std::memory_order_release);
  g_initialized_flag.store(false, std::memory_order_release);
  int rank = 0, size = 1;
  PMPI_Comm_rank(MPI_COMM_WORLD, &rank);
  PMPI_Comm_size(MPI_COMM_WORLD, &size);
  // Every rank has finished its last engine call before any endpoint closes.
  PMPI_Barrier(MPI_COMM_WORLD);
  teardown_comm_engines();
  write_report(rank, size);
  g_trace.close();
}

}  // namespace optireduce::pmpi
