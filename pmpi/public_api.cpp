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

int optireduce_comm_accepts(MPI_Comm comm, uint64_t count, int format) {
  using namespace optireduce;
  if (!pmpi::initialized() || comm == MPI_COMM_NULL) return -1;
  if (!pmpi::active()) return 0;
  int inter = 0, size = 0;
  if (PMPI_Comm_test_inter(comm, &inter) != MPI_SUCCESS || PMPI_Comm_size(comm, &size) != MPI_SUCCESS) return -1;
  if (inter || size < 2) return 0;
  pmpi::CommState& state = pmpi::comm_state(comm);
  std::lock_guard lock(state.mutex);
  if (!state.engine) return 0;
  int reason = 0;
  const int rc = optireduce_engine_accepts(state.engine, count, format, OPTIREDUCE_OP_SUM, &reason);
  if (rc == OPTIREDUCE_INVALID) return -1;
  return rc == OPTIREDUCE_OK ? 1 : 0;
}

int optireduce_comm_accepts_f(int fortran_comm, uint64_t count, int format) {
  return optireduce_comm_accepts(PMPI_Comm_f2c(static_cast<MPI_Fint>(fortran_comm)), count, format);
}

}  // extern "C"
