// Per-communicator state: its handle of the engine's entry point (include/optireduce/engine.h),
// whose engine is created inside the communicator's first eligible call (every rank is in that
// call, so the address exchange over the communicator is safe), cached as a communicator
// attribute, closed by the attribute's delete callback or before PMPI_Finalize.
#pragma once

#include <mpi.h>

#include <cstdint>
#include <map>
#include <mutex>

#include "optireduce/engine.h"

namespace optireduce::pmpi {

struct CommState {
  MPI_Comm comm = MPI_COMM_NULL;
  std::mutex mutex;                       // one call at a time per communicator (device check and call)
  optireduce_engine* engine = nullptr;    // null outside MPI_Init..MPI_Finalize
  // Agreed verdicts on user ops met here, by the op's registration serial (sum_format.cpp).
  std::map<std::uint64_t, int> sum_verdicts;
};

void setup_comm_engines();
// The state of `comm` (created empty on first use; no MPI communication).
CommState& comm_state(MPI_Comm comm);
// Closes every handle still open (before PMPI_Finalize) and releases the attribute key.
void teardown_comm_engines();

}  // namespace optireduce::pmpi
