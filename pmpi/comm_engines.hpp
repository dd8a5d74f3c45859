// Per-communicator state: its mode (MPI_Comm_set_info "optireduce_mode" or the C API) and its
// engine, created lazily inside the first eligible call (every rank is in that call, so the
// address exchange over the communicator is safe), cached as a communicator attribute, destroyed
// by the attribute's delete callback or before PMPI_Finalize.
#pragma once

#include <mpi.h>

#include <memory>
#include <mutex>
#include <optional>
#include <map>
#include <set>
#include <string>

#include "optireduce/engine/config/config.hpp"
#include "optireduce/engine/engine/engine.hpp"
#include "engine_history.hpp"

namespace optireduce::pmpi {

struct CommState {
  MPI_Comm comm = MPI_COMM_NULL;
  std::mutex mutex;                 // one engine call at a time per communicator
  std::optional<Mode> mode;         // per-communicator override of OPTIREDUCE_MODE (agreed)
  bool engine_tried = false;
  std::unique_ptr<Engine> engine;   // null when creation failed on any rank (then all fall back)
  // An engine call failed (on every rank alike: failures are agreed): the later calls of this
  // communicator go to PMPI_Allreduce.
  bool engine_failed = false;

  // What the C API reads, apart from the call mutex so a monitoring thread never waits for a
  // call in progress.
  mutable std::mutex snapshot_mutex;
  CallStats last_call;
  AgreedCounts agreed;
};

void setup_comm_engines();
// The state of `comm` (created empty on first use; no MPI communication).
CommState& comm_state(MPI_Comm comm);
// The state's engine, creating it when needed: collective on first use. Call with state.mutex held.
Engine* comm_engine(CommState& state, const Config& config);
// Destroys every engine still alive (before PMPI_Finalize) and releases the attribute key.
void teardown_comm_engines();
EngineHistory engine_history();

}  // namespace optireduce::pmpi
