#include "process_state.hpp"

#include <atomic>
#include <cstring>
#include <mutex>
#include <set>

#include "optireduce/engine/log.hpp"
#include "optireduce/engine/report/report.hpp"
#include "optireduce/engine/report/trace.hpp"
#include "optireduce/optireduce.h"
#include "engine_history.hpp"
#include "group_engine.hpp"
#include "job_report.hpp"

namespace optireduce::entry {
namespace {

std::mutex g_lifecycle;  // init and finalize
std::atomic<bool> g_open{false};
Config g_config;
Environment g_environment;  // what g_config was parsed from, for the report's settings
int g_world_rank = 0;       // the trace names ranks of the world
CallTrace g_trace;
std::mutex g_trace_mutex;
std::mutex g_handles_mutex;  // guards g_handles
std::set<GroupEngine*> g_handles;
std::mutex g_history_mutex;  // guards g_history
EngineHistory g_history;

std::uint64_t fnv1a(const std::string& text) {
  std::uint64_t h = 1469598103934665603ull;
  for (unsigned char c : text) h = (h ^ c) * 1099511628211ull;
  return h;
}

struct Agreement {
  std::uint32_t ok;
  std::uint32_t flags;
  std::uint64_t settings;
};

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

std::string init_process_state(CallbackBootstrap& world, std::uint32_t flags, std::uint32_t* all_flags, bool* mine_failed) {
  std::lock_guard lock(g_lifecycle);
  *mine_failed = false;
  if (g_open.load()) return {};
  const int rank = world.rank(), size = world.ranks();
  set_log_rank(rank);
  g_world_rank = rank;
  g_environment = process_environment();
  ConfigResult parsed = parse_config(g_environment);
  if (parsed.ok()) parsed.error = open_outputs(parsed.config, rank);
  const std::string settings = parsed.config.agreement_text() + ";version=" + optireduce_version();
  const Agreement mine{parsed.ok() ? 1u : 0u, flags, fnv1a(settings)};
  const auto all = world.allgather({reinterpret_cast<const std::byte*>(&mine), sizeof mine});
  std::vector<Agreement> agreed;
  for (const auto& blob : all) {
    if (blob.size() != sizeof(Agreement)) break;
    agreed.emplace_back();
    std::memcpy(&agreed.back(), blob.data(), sizeof(Agreement));
  }
  std::string error;
  if (static_cast<int>(agreed.size()) != size) {
    error = world.failure().empty() ? "the settings' all-gather failed" : world.failure();
    *mine_failed = true;
  }
  int first_bad = -1, first_different = -1;
  std::uint32_t any = 0;
  for (int r = 0; error.empty() && r < size; ++r) {
    if (!agreed[r].ok && first_bad < 0) first_bad = r;
    if (agreed[r].ok && agreed[r].settings != agreed[0].settings && first_different < 0) first_different = r;
    any |= agreed[r].flags;
  }
  if (error.empty() && first_bad >= 0) {
    *mine_failed = rank == first_bad;
    error = rank == first_bad ? parsed.error : "rank " + std::to_string(first_bad) + "'s OPTIREDUCE_* settings are not valid";
  } else if (error.empty() && first_different >= 0 && agreed[0].ok) {
    *mine_failed = rank == first_different;
    error = "settings differ between ranks: rank " + std::to_string(first_different) +
            (rank == first_different ? " has \"" + settings + "\", which is not rank 0's" : "'s are not rank 0's") +
            "; export the same OPTIREDUCE_* values to every rank";
  }
  if (!error.empty()) {
    g_trace.close();
    return error;
  }
  if (all_flags) *all_flags = any;
  g_config = parsed.config;
  set_log_level(g_config.log_level);
  g_open.store(true, std::memory_order_release);
  OR_LOG(debug, "initialised: %s", settings.c_str());
  return {};
}

bool finalize_process_state(CallbackBootstrap& world) {
  std::lock_guard lock(g_lifecycle);
  if (!g_open.load()) return false;
  // Every rank has finished its last engine call before any endpoint closes.
  world.allgather({});
  {
    std::lock_guard handles(g_handles_mutex);
    for (GroupEngine* h : g_handles) h->retire();
  }
  EngineHistory history;
  {
    std::lock_guard h(g_history_mutex);
    history = g_history;
  }
  write_job_report(world, world.rank(), world.ranks(), g_config, g_environment, history);
  g_open.store(false, std::memory_order_release);
  g_trace.close();
  return true;
}

bool process_state_open() { return g_open.load(std::memory_order_acquire); }
const Config& process_config() { return g_config; }

void trace_call(const CallStats& call) {
  if (!g_trace.enabled()) return;
  std::lock_guard lock(g_trace_mutex);
  g_trace.write(g_world_rank, call);
}

void register_handle(GroupEngine* handle) {
  std::lock_guard lock(g_handles_mutex);
  g_handles.insert(handle);
}

void unregister_handle(GroupEngine* handle) {
  std::lock_guard lock(g_handles_mutex);
  g_handles.erase(handle);
}

void remember_engine(const Engine& engine) {
  std::lock_guard lock(g_history_mutex);
  g_history.add(engine);
}

}  // namespace optireduce::entry
