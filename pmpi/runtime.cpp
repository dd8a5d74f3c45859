#include "runtime.hpp"

#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <mutex>

#include "optireduce/engine/report/trace.hpp"
#include "comm_engines.hpp"
#include "device_memory.hpp"
#include "optireduce/engine/log.hpp"
#include "optireduce/optireduce.h"
#include "optireduce/engine/report/report.hpp"
#include "optireduce/engine/report/stats.hpp"

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
Environment g_environment;  // what g_config was parsed from, for the report's settings
thread_local int t_nesting = 0;

std::uint64_t fnv1a(const std::string& text) {
  std::uint64_t h = 1469598103934665603ull;
  for (unsigned char c : text) h = (h ^ c) * 1099511628211ull;
  return h;
}

struct Agreement {
  int ok;
  int cuda;  // a CUDA driver is loaded in this process
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

RankReport this_rank(int rank) {
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
  r.calibration_reruns = h.calibration_reruns;
  r.resend_requests = h.resend_requests;
  r.resend_chunks_asked = h.resend_chunks_asked;
  r.resent_chunks = h.resent_chunks;
  r.contributions_added_on_arrival = h.contributions_added_on_arrival;
  r.contributions_waited_in_slot = h.contributions_waited_in_slot;
  r.late = h.late;
  r.rejected_by_reason = h.rejected_by_reason;
  r.transport_counters = h.transport_counters;
  return r;
}

// The finalize line: rank 0 prints it when the job paid for something (entries compensated, a
// fallback, divergent replicas), or always at OPTIREDUCE_LOG=info.
void print_cost_line(const RankReport& mine, int rank, int size, bool always) {
  const RankFigures figures = figures_of(mine);
  std::vector<RankFigures> all(rank == 0 ? static_cast<std::size_t>(size) : 0);
  PMPI_Gather(&figures, kFigures, MPI_DOUBLE, all.data(), kFigures, MPI_DOUBLE, 0, MPI_COMM_WORLD);
  if (rank != 0 || !(always || had_cost(all))) return;
  const std::string line = render_cost_line(all) + "\n";
  std::fputs(line.c_str(), stderr);
}

void write_report(int rank, int size) {
  // Rank 0's settings decide for everyone (report path and log level may differ per rank, and
  // every rank must take part in the same gathers).
  int wanted = (g_config.report_path.empty() ? 0 : 1) | (log_enabled(LogLevel::warn) ? 2 : 0) |
               (log_enabled(LogLevel::info) ? 4 : 0);
  PMPI_Bcast(&wanted, 1, MPI_INT, 0, MPI_COMM_WORLD);
  if (!wanted) return;
  const RankReport r = this_rank(rank);
  if (wanted & 6) print_cost_line(r, rank, size, wanted & 4);
  if (!(wanted & 1)) return;
  const auto objects = gather_to_root(render_rank(r), rank, size);
  if (rank != 0) return;
  std::ofstream out(g_config.report_path, std::ios::trunc);
  out << render_report(effective_settings(g_environment, g_config), objects);
  if (!out) OR_LOG(warn, "cannot write the report to OPTIREDUCE_REPORT=\"%s\": %s", g_config.report_path.c_str(), std::strerror(errno));
  else OR_LOG(info, "report of %d ranks written to %s", size, g_config.report_path.c_str());
}

// Whether the outputs can be written, checked now rather than after the whole run: the trace
// (appended by every rank) is opened here, the report (written by rank 0) is tried. "" or one
// line naming the variable, its value and why.
std::string open_outputs(const Config& config, int rank) {
  auto problem = [](const char* variable, const std::string& value, const std::string& why) {
    return std::string(variable) + "=\"" + value + "\" is not writable: " + why + "; accepted: a writable file path";
  };
  // The trace is opened, never tried: a try creates and removes the file, which would remove the
  // one another rank has just opened.
  if (!config.trace_path.empty() && !g_trace.open(config.trace_path)) {
    const int error = errno;
    std::string why = output_path_problem(config.trace_path);
    return problem("OPTIREDUCE_TRACE", config.trace_path, why.empty() ? std::strerror(error) : why);
  }
  if (rank == 0 && !config.report_path.empty())
    if (std::string why = output_path_problem(config.report_path); !why.empty())
      return problem("OPTIREDUCE_REPORT", config.report_path, why);
  return {};
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

  g_environment = process_environment();
  ConfigResult parsed = parse_config(g_environment);
  if (parsed.ok()) parsed.error = open_outputs(parsed.config, rank);
  const std::string settings = parsed.config.agreement_text() + ";version=" + optireduce_version();
  Agreement mine{parsed.ok() ? 1 : 0, cuda_driver_loaded() ? 1 : 0, fnv1a(settings)};
  std::vector<Agreement> all(static_cast<std::size_t>(size));
  PMPI_Allgather(&mine, sizeof mine, MPI_BYTE, all.data(), sizeof mine, MPI_BYTE, MPI_COMM_WORLD);
  int first_bad = -1, first_different = -1;
  bool cuda = false;
  for (int r = 0; r < size; ++r) {
    if (!all[r].ok && first_bad < 0) first_bad = r;
    if (all[r].ok && all[r].settings != all[0].settings && first_different < 0) first_different = r;
    cuda = cuda || all[r].cuda;
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
  set_driver_on_some_rank(cuda);
  setup_comm_engines();
  g_initialized_flag.store(true, std::memory_order_release);
  // Off still interposes (so a communicator can opt in with MPI_Comm_set_info) but by default
  // every call passes through.
  g_active.store(true, std::memory_order_release);
  OR_LOG(debug, "initialised: %s%s", settings.c_str(), cuda ? "; a CUDA driver is loaded: device buffers pass through" : "");
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
