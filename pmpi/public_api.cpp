// The public C API of include/optireduce/optireduce.h.
#include <mpi.h>

#include "optireduce/engine.h"
#include "optireduce/optireduce.h"

#include "comm_engines.hpp"
#include "runtime.hpp"

extern "C" {

int optireduce_comm_last_call(MPI_Comm comm, optireduce_call_stats* out) {
  using namespace optireduce;
  if (!out || !pmpi::initialized() || comm == MPI_COMM_NULL) return -1;
  *out = {};
  // The handle keeps its snapshot apart from the call, so this never waits for a call.
  pmpi::CommState& state = pmpi::comm_state(comm);
  return state.engine ? optireduce_engine_last_call(state.engine, out) : 0;
}

int optireduce_comm_last_call_f(int fortran_comm, optireduce_call_stats* out) {
  return optireduce_comm_last_call(PMPI_Comm_f2c(static_cast<MPI_Fint>(fortran_comm)), out);
}

}  // extern "C"
