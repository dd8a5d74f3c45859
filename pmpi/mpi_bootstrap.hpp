// The engine's bootstrap (include/optireduce/engine.h) over a communicator: PMPI_Allgather,
// PMPI_Iallgather and PMPI_Allreduce; only used inside a collective call.
#pragma once

#include <mpi.h>

#include "optireduce/engine.h"

namespace optireduce::pmpi {

// Callbacks over `comm` whose context lives until the bootstrap's release (the engine handle's
// close).
optireduce_bootstrap mpi_bootstrap(MPI_Comm comm);

}  // namespace optireduce::pmpi
