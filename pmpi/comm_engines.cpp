#include "comm_engines.hpp"

#include <sched.h>

#include "optireduce/engine/clock_us.hpp"
#include "optireduce/engine/log.hpp"
#include "mpi_bootstrap.hpp"
#include "optireduce/engine/report/stats.hpp"

namespace optireduce::pmpi {
namespace {

int g_keyval = MPI_KEYVAL_INVALID;
std::mutex g_mutex;                  // guards g_live and g_history
std::set<CommState*> g_live;
EngineHistory g_history;

void retire(CommState* state) {
  {
    std::lock_guard lock(g_mutex);
    g_live.erase(state);
    if (state->engine) g_history.add(*state->engine);
  }
  delete state;  // destroys the engine and its transport; makes no MPI call
}

int delete_state(MPI_Comm, int, void* value, void*) {
  retire(static_cast<CommState*>(value));
  return MPI_SUCCESS;
}

// A free core for the Hadamard worker of every rank of `comm` on this host: this process may run
// on at least twice as many CPUs as there are such ranks. Collective over `comm`.
bool core_free_for_worker(MPI_Comm comm) {
  MPI_Comm local = MPI_COMM_NULL;
  int local_ranks = 1;
  if (PMPI_Comm_split_type(comm, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &local) == MPI_SUCCESS &&
      local != MPI_COMM_NULL) {
    PMPI_Comm_size(local, &local_ranks);
    PMPI_Comm_free(&local);
  }
  cpu_set_t cpus;
  CPU_ZERO(&cpus);
  if (sched_getaffinity(0, sizeof cpus, &cpus) != 0) return false;
  return CPU_COUNT(&cpus) >= 2 * local_ranks;
}

}  // namespace

void setup_comm_engines() {
  PMPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, &delete_state, &g_keyval, nullptr);
}

CommState& comm_state(MPI_Comm comm) {
  void* value = nullptr;
  int found = 0;
  PMPI_Comm_get_attr(comm, g_keyval, &value, &found);
  if (found) return *static_cast<CommState*>(value);
  // Two threads may meet a communicator for the first time at once (a monitoring thread asking
  // for the last call while the first MPI_Allreduce runs): one of them creates the state.
  std::lock_guard lock(g_mutex);
  PMPI_Comm_get_attr(comm, g_keyval, &value, &found);
  if (found) return *static_cast<CommState*>(value);
  auto* state = new CommState;
  state->comm = comm;
  g_live.insert(state);
  PMPI_Comm_set_attr(comm, g_keyval, state);
  return *state;
}

Engine* comm_engine(CommState& state, const Config& config) {
  if (state.engine_tried) return state.engine.get();
  state.engine_tried = true;
  int rank = 0, size = 0;
  PMPI_Comm_rank(state.comm, &rank);
  PMPI_Comm_size(state.comm, &size);
  // Per communicator: whether a core is free depends on how many of its ranks share this host.
  const bool overlap = config.hadamard != HadamardMode::off &&
                       (config.hadamard_overlap == 1 || (config.hadamard_overlap == 2 && core_free_for_worker(state.comm)));
  EngineOptions options = engine_options(config, overlap);
  options.bounded_calls = state.mode.value_or(config.mode) == Mode::bounded;
  Status status;
  const auto created_from = Clock::now();
  state.engine = Engine::create(rank, size, std::make_unique<MpiBootstrap>(state.comm), options, status);
  if (state.engine) {
    ProcessStats::instance().record_engine_created();
    OR_LOG(debug, "engine ready on a communicator of %d ranks in %.1f ms (%s; Hadamard worker %s)", size,
           us_since(created_from) / 1000,
           state.engine->transport_description().c_str(), options.hadamard_overlap ? "on" : "off");
  } else {
    ProcessStats::instance().record_engine_failure();
    // Every rank reached the same verdict inside Engine::create, so all fall back together.
    OR_LOG(warn, "no engine for a communicator of %d ranks, its calls go to PMPI_Allreduce: %s", size, status.text().c_str());
  }
  return state.engine.get();
}

void teardown_comm_engines() {
  std::vector<MPI_Comm> comms;
  {
    std::lock_guard lock(g_mutex);
    for (CommState* s : g_live) comms.push_back(s->comm);
  }
  // Deleting the attribute runs delete_state, exactly as MPI_Comm_free would.
  for (MPI_Comm c : comms) PMPI_Comm_delete_attr(c, g_keyval);
  if (g_keyval != MPI_KEYVAL_INVALID) PMPI_Comm_free_keyval(&g_keyval);
}

EngineHistory engine_history() {
  std::lock_guard lock(g_mutex);
  return g_history;
}

}  // namespace optireduce::pmpi
