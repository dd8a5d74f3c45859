#include "group_engine.hpp"

#include <sched.h>

#include <algorithm>
#include <optional>
#include <span>

#include "optireduce/engine/clock_us.hpp"
#include "optireduce/engine/log.hpp"
#include "optireduce/engine/report/stats.hpp"
#include "optireduce/engine/report/topology.hpp"
#include "process_state.hpp"

namespace optireduce::entry {
namespace {

// The engine's format of a C API format; nullopt for one this entry point does not know.
std::optional<ElementFormat> format_of(int format) {
  switch (format) {
    case OPTIREDUCE_FORMAT_FLOAT32: return ElementFormat::float32;
    case OPTIREDUCE_FORMAT_FLOAT16: return ElementFormat::float16;
    case OPTIREDUCE_FORMAT_BFLOAT16: return ElementFormat::bfloat16;
  }
  return std::nullopt;
}

// How many ranks of the group run on this host (host names match). Collective.
int ranks_on_this_host(CallbackBootstrap& bootstrap) {
  const std::string mine = host_name();
  int n = 0;
  for (const auto& name : bootstrap.allgather({reinterpret_cast<const std::byte*>(mine.data()), mine.size()}))
    n += std::string(reinterpret_cast<const char*>(name.data()), name.size()) == mine;
  return std::max(n, 1);
}

// A free core for the Hadamard worker of every rank of the group on this host: this process may
// run on at least twice as many CPUs as there are such ranks. Collective.
bool core_free_for_worker(CallbackBootstrap& bootstrap) {
  const int local_ranks = ranks_on_this_host(bootstrap);
  cpu_set_t cpus;
  CPU_ZERO(&cpus);
  if (sched_getaffinity(0, sizeof cpus, &cpus) != 0) return false;
  return CPU_COUNT(&cpus) >= 2 * local_ranks;
}

const char* own_path(const optireduce_bootstrap& c) { return c.own_path ? c.own_path : "the front end's own reduction"; }

}  // namespace

GroupEngine::GroupEngine(const optireduce_bootstrap& callbacks) : callbacks_(callbacks) { register_handle(this); }

GroupEngine::~GroupEngine() {
  unregister_handle(this);
  retire();
  if (callbacks_.release) callbacks_.release(callbacks_.context);
}

void GroupEngine::retire() {
  std::lock_guard lock(mutex_);
  retired_ = true;
  if (!engine_) return;
  remember_engine(*engine_);
  bootstrap_ = nullptr;
  engine_.reset();  // makes no call of the bootstrap
}

void GroupEngine::set_mode(Mode mode) {
  std::lock_guard lock(mutex_);
  mode_ = mode;
}

Engine* GroupEngine::engine_for_call(const Config& config) {
  if (tried_) return engine_.get();
  tried_ = true;
  const int rank = callbacks_.rank, size = callbacks_.ranks;
  auto bootstrap = std::make_unique<CallbackBootstrap>(callbacks_);
  // Per group: whether a core is free depends on how many of its ranks share this host.
  const bool overlap = config.hadamard != HadamardMode::off &&
                       (config.hadamard_overlap == 1 || (config.hadamard_overlap == 2 && core_free_for_worker(*bootstrap)));
  EngineOptions options = engine_options(config, overlap);
  options.bounded_calls = mode_.value_or(config.mode) == Mode::bounded;
  Status status;
  const auto created_from = Clock::now();
  const CallbackBootstrap* kept = bootstrap.get();
  engine_ = Engine::create(rank, size, std::move(bootstrap), options, status);
  if (engine_) {
    bootstrap_ = kept;
    ProcessStats::instance().record_engine_created();
    if (engine_->tiers()) ProcessStats::instance().record_placement(engine_->tiers()->placement().counts_text());
    OR_LOG(debug, "engine ready on a group of %d ranks in %.1f ms (%s; Hadamard worker %s)", size,
           us_since(created_from) / 1000, engine_->transport_description().c_str(), options.hadamard_overlap ? "on" : "off");
  } else {
    ProcessStats::instance().record_engine_failure();
    std::lock_guard snapshot(snapshot_mutex_);
    error_ = "no engine: " + status.text();
    // Every rank reached the same verdict inside Engine::create, so all fall back together.
    OR_LOG(warn, "no engine for a group of %d ranks, its calls go to %s: %s", size, own_path(callbacks_),
           status.text().c_str());
  }
  return engine_.get();
}

int GroupEngine::admit(std::uint64_t count, int format, int op, int* reason) const {
  if (!process_state_open()) return OPTIREDUCE_INVALID;
  // Decided from the arguments and the group's agreed state alone, the same on every rank.
  const auto element = format_of(format);
  if (!element) return OPTIREDUCE_INVALID;
  if (op != OPTIREDUCE_OP_SUM) return OPTIREDUCE_UNSUPPORTED;
  const Config& config = process_config();
  auto decline = [reason](PassReason why) {
    if (reason) *reason = static_cast<int>(why);
    return OPTIREDUCE_DECLINED;
  };
  if (count * element_bytes(*element) < config.min_bytes) return decline(PassReason::size);
  if (mode_.value_or(config.mode) == Mode::off) return decline(PassReason::mode_off);
  if (failed_) return decline(PassReason::engine_failed);
  if (retired_ || (tried_ && !engine_)) return decline(PassReason::no_engine);
  return OPTIREDUCE_OK;
}

int GroupEngine::accepts(std::uint64_t count, int format, int op, int* reason) {
  std::lock_guard lock(mutex_);
  return admit(count, format, op, reason);
}

template <typename Call>
int GroupEngine::run(std::uint64_t count, int format, int op, int* reason, Call&& call) {
  CallStats stats;
  {
    std::lock_guard lock(mutex_);
    if (const int verdict = admit(count, format, op, reason); verdict != OPTIREDUCE_OK) return verdict;
    const Config& config = process_config();
    Engine* engine = engine_for_call(config);
    if (!engine) {
      if (reason) *reason = static_cast<int>(PassReason::no_engine);
      return OPTIREDUCE_DECLINED;
    }
    stats = call(*engine, *format_of(format), mode_.value_or(config.mode) == Mode::bounded);
    // A collective of the front end that failed inside an otherwise complete call (an agreement
    // round) fails the call too: the ranks' next decisions could differ.
    if (stats.ok() && bootstrap_ && !bootstrap_->failure().empty()) stats.status = PeerError(bootstrap_->failure());
    // Every rank failed this same call (the failure is agreed), so every rank declines the
    // group's later calls alike.
    if (!stats.ok()) failed_ = true;
    std::lock_guard snapshot(snapshot_mutex_);
    last_call_ = stats;
    agreed_ = engine->agreed();
    if (!stats.ok()) error_ = stats.status.message();
  }
  const bool bounded = stats.kind == CallKind::bounded;
  ProcessStats::instance().record_intercepted({count * element_bytes(*format_of(format)), stats.entries,
                                               stats.dropped_entries, stats.latency_us, bounded,
                                               stats.kind == CallKind::fallback, stats.deadline_us[0] + stats.deadline_us[1],
                                               bounded && stats.cut, stats.kind == CallKind::mpi, stats.shape, stats.stages});
  trace_call(stats);
  return stats.ok() ? OPTIREDUCE_OK : OPTIREDUCE_FAILED;
}

int GroupEngine::allreduce(const void* input, void* output, std::uint64_t count, int format, int op, int* reason) {
  if (count > 0 && (!input || !output)) return OPTIREDUCE_INVALID;
  return run(count, format, op, reason, [&](Engine& engine, ElementFormat f, bool bounded) {
    return engine.allreduce(input, output, count, f, bounded);
  });
}

int GroupEngine::reduce_scatter(const void* input, void* output, const std::uint64_t* counts, int format, int op,
                                int* reason) {
  if (!counts) return OPTIREDUCE_INVALID;
  const std::span<const std::uint64_t> blocks(counts, static_cast<std::size_t>(callbacks_.ranks));
  std::uint64_t total = 0;
  for (const std::uint64_t n : blocks) total += n;
  if ((total > 0 && !input) || (blocks[static_cast<std::size_t>(callbacks_.rank)] > 0 && !output))
    return OPTIREDUCE_INVALID;
  return run(total, format, op, reason, [&](Engine& engine, ElementFormat f, bool bounded) {
    return engine.reduce_scatter(input, output, blocks, f, bounded);
  });
}

optireduce_call_stats GroupEngine::last_call() const {
  std::lock_guard lock(snapshot_mutex_);
  optireduce_call_stats out{};
  const CallStats& c = last_call_;
  if (c.sequence == 0) return out;
  out.sequence = c.sequence;
  out.entries = c.entries;
  out.dropped_entries = c.dropped_entries;
  out.filled_entries = c.filled_entries;
  out.dropped_fraction = c.entries ? double(c.dropped_entries) / double(c.entries) : 0.0;
  out.latency_us = c.latency_us;
  for (int p = 0; p < 2; ++p) {
    out.deadline_us[p] = c.deadline_us[p];
    out.phase_us[p] = c.phase_us[p];
  }
  out.kind = static_cast<int>(c.kind);
  out.ok = c.ok() ? 1 : 0;
  out.divergent_calls = agreed_.divergent_calls;
  out.fallbacks = agreed_.fallbacks;
  out.collective = static_cast<int>(c.shape.collective);
  out.format = static_cast<int>(c.shape.format);
  return out;
}

std::string GroupEngine::error() const {
  std::lock_guard lock(snapshot_mutex_);
  return error_;
}

}  // namespace optireduce::entry
