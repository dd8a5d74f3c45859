// The engine's bootstrap (include/optireduce/engine.h) over a communicator: PMPI_Allgather,
// PMPI_Iallgather and PMPI_Allreduce; only used inside a collective call.
#pragma once

#include <mpi.h>

#include "optireduce/engine.h"

namespace optireduce::pmpi {

// Callbacks over `comm` whose context lives until the bootstrap's release (the engine handle's
// close).
optireduce_bootstrap mpi_bootstrap(MPI_Comm comm);

// Moves an all-gather that start_allgather began and finish_allgather has not finished forward
// (PMPI_Test); true when none is pending any more. The MPI moves a non-blocking collective only
// inside its own calls, and the engine makes none between the two halves: left alone, every
// round of the all-gather ran inside the call that finishes it, where a TCP segment lost on the
// way held that call for a retransmission timeout. Called after each engine call, the rounds
// run while the calls between go on, and the finish mostly finds the all-gather complete.
bool progress_allgather(void* context);

}  // namespace optireduce::pmpi
