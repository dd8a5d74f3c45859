#include "comm_engines.hpp"

#include <set>
#include <vector>

#include "mpi_bootstrap.hpp"

namespace optireduce::pmpi {
namespace {

int g_keyval = MPI_KEYVAL_INVALID;
std::mutex g_mutex;  // guards g_live
std::set<CommState*> g_live;

void retire(CommState* state) {
  {
    std::lock_guard lock(g_mutex);
    g_live.erase(state);
  }
  // Keeps what the engine did for the report; makes no MPI call but completing a pending
  // all-gather every rank started.
  optireduce_engine_close(state->engine);
  delete state;
}

int delete_state(MPI_Comm, int, void* value, void*) {
  retire(static_cast<CommState*>(value));
  return MPI_SUCCESS;
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
  const optireduce_bootstrap bootstrap = mpi_bootstrap(comm);
  state->engine = optireduce_engine_open(&bootstrap);
  if (!state->engine) bootstrap.release(bootstrap.context);
  g_live.insert(state);
  PMPI_Comm_set_attr(comm, g_keyval, state);
  return *state;
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

}  // namespace optireduce::pmpi
