// Per-communicator engines: created lazily inside the first eligible call (every rank is in that
// call, so the address exchange over the communicator is safe), cached as a communicator
// attribute, destroyed by the attribute's delete callback or before PMPI_Finalize.
#pragma once

#include <mpi.h>

#include <memory>
#include <mutex>
#include <set>
#include <string>

#include "config.hpp"
#include "engine.hpp"

namespace optireduce::pmpi {

struct CommState {
  MPI_Comm comm = MPI_COMM_NULL;
  std::mutex mutex;               // one engine call at a time per communicator
  std::unique_ptr<Engine> engine; // null when creation failed on any rank (then all fall back)
};

// What engines did, kept after they are destroyed, for the report.
struct EngineHistory {
  std::size_t peak_buffer_bytes = 0;
  std::size_t largest_call_bytes = 0;
  unsigned long long rejected_messages = 0;
  std::set<std::string> transports;
};

void setup_comm_engines();
// The state for `comm`, creating its engine when needed. Collective on first use.
CommState& comm_state(MPI_Comm comm, const Config& config);
// Destroys every engine still alive (before PMPI_Finalize) and releases the attribute key.
void teardown_comm_engines();
EngineHistory engine_history();

}  // namespace optireduce::pmpi
