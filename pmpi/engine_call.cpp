#include "engine_call.hpp"

#include "optireduce/log.hpp"
#include "sum_format.hpp"

namespace optireduce::pmpi {

std::optional<PassReason> engine_outcome(MPI_Comm comm, CommState& state, const EngineCall& call, int rc, int reason,
                                         int* result) {
  if (rc == OPTIREDUCE_DECLINED) return static_cast<PassReason>(reason);
  if (rc != OPTIREDUCE_OK && rc != OPTIREDUCE_FAILED) return PassReason::arguments;
  if (rc == OPTIREDUCE_OK) {
    *result = MPI_SUCCESS;
    return std::nullopt;
  }
  // Every rank failed this same call (the failure is agreed), so every rank sends the
  // communicator's later calls to the MPI alike; its rank 0 says so.
  int rank = 0;
  PMPI_Comm_rank(comm, &rank);
  if (rank == 0) {
    char why[512];
    optireduce_engine_error(state.engine, why, sizeof why);
    OR_LOG(error, "%s of %llu %s elements failed: %s; this communicator's later calls go to %s", call.name,
           static_cast<unsigned long long>(call.count), format_name(call.format), why, call.mpi_path);
  }
  // Never hang and never return wrong data silently: the communicator's error handler decides
  // (MPI_ERRORS_ARE_FATAL, the default, ends the job).
  *result = MPI_ERR_OTHER;
  PMPI_Comm_call_errhandler(comm, MPI_ERR_OTHER);
  return std::nullopt;
}

}  // namespace optireduce::pmpi
