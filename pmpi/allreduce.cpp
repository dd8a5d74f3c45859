// C entry points: MPI_Allreduce (and MPI_Allreduce_c where the MPI declares it).
#include "allreduce.hpp"

#include "comm_engines.hpp"
#include "optireduce/engine/log.hpp"
#include "runtime.hpp"
#include "optireduce/engine/stats.hpp"

namespace optireduce::pmpi {

bool eligible(const void* sendbuf, const void* recvbuf, std::int64_t count, MPI_Datatype datatype, MPI_Op op,
              MPI_Comm comm) {
  if (!active() || op != MPI_SUM || comm == MPI_COMM_NULL || count < 0) return false;
  if (datatype != MPI_FLOAT) {
    // Fortran REAL is its own handle; it is 4 bytes unless the program was built with a
    // default-real-8 flag, which the size check catches.
    if (datatype != MPI_REAL && datatype != MPI_REAL4) return false;
    int size = 0;
    if (PMPI_Type_size(datatype, &size) != MPI_SUCCESS || size != 4) return false;
  }
  // Arguments PMPI would reject keep PMPI's error behaviour.
  if (count > 0 && (recvbuf == nullptr || sendbuf == recvbuf)) return false;
  if (static_cast<std::uint64_t>(count) * sizeof(float) < config().min_bytes) return false;
  int inter = 0, size = 0;
  if (PMPI_Comm_test_inter(comm, &inter) != MPI_SUCCESS || inter) return false;
  if (PMPI_Comm_size(comm, &size) != MPI_SUCCESS || size < 2) return false;
  return true;
}

bool run_engine(const void* sendbuf, void* recvbuf, std::int64_t count, MPI_Comm comm, int* result) {
  CommState& state = comm_state(comm);
  const float* input = static_cast<const float*>(sendbuf == MPI_IN_PLACE ? recvbuf : sendbuf);
  CallStats stats;
  {
    std::lock_guard lock(state.mutex);
    const Mode mode = state.mode.value_or(config().mode);
    if (mode == Mode::off || state.engine_failed) return false;
    Engine* engine = comm_engine(state, config());
    if (!engine) return false;
    stats = engine->allreduce_sum(input, static_cast<float*>(recvbuf), static_cast<std::uint64_t>(count),
                                  mode == Mode::bounded);
    if (!stats.ok()) {
      // Every rank failed this same call (the failure is agreed), so every rank sends the
      // communicator's later calls to PMPI_Allreduce alike.
      state.engine_failed = true;
      // The same line on every rank: the communicator's rank 0 says it.
      if (engine->rank() == 0)
        OR_LOG(error, "MPI_Allreduce of %lld floats failed: %s; this communicator's later calls go to PMPI_Allreduce",
               static_cast<long long>(count), stats.status.message().c_str());
    }
    std::lock_guard snapshot(state.snapshot_mutex);
    state.last_call = stats;
    state.agreed = engine->agreed();
  }
  ProcessStats::instance().record_intercepted({static_cast<std::uint64_t>(count) * sizeof(float), stats.entries,
                                               stats.dropped_entries, stats.latency_us,
                                               stats.kind == CallKind::bounded, stats.kind == CallKind::fallback,
                                               stats.deadline_us[0] + stats.deadline_us[1]});
  trace_call(stats);
  if (!stats.ok()) {
    // Never hang and never return wrong data silently: the communicator's error handler decides
    // (MPI_ERRORS_ARE_FATAL, the default, ends the job).
    *result = MPI_ERR_OTHER;
    PMPI_Comm_call_errhandler(comm, MPI_ERR_OTHER);
    return true;
  }
  *result = MPI_SUCCESS;
  return true;
}

void count_passthrough() {
  if (initialized()) ProcessStats::instance().record_passthrough();
}

}  // namespace optireduce::pmpi

using namespace optireduce::pmpi;

extern "C" {

int MPI_Allreduce(const void* sendbuf, void* recvbuf, int count, MPI_Datatype datatype, MPI_Op op, MPI_Comm comm) {
  if (!NestedCallGuard::nested()) {
    int rc = MPI_SUCCESS;
    if (eligible(sendbuf, recvbuf, count, datatype, op, comm) && run_engine(sendbuf, recvbuf, count, comm, &rc)) return rc;
    count_passthrough();
  }
  return PMPI_Allreduce(sendbuf, recvbuf, count, datatype, op, comm);
}

#if MPI_VERSION >= 4
int MPI_Allreduce_c(const void* sendbuf, void* recvbuf, MPI_Count count, MPI_Datatype datatype, MPI_Op op, MPI_Comm comm) {
  if (!NestedCallGuard::nested()) {
    int rc = MPI_SUCCESS;
    if (eligible(sendbuf, recvbuf, count, datatype, op, comm) && run_engine(sendbuf, recvbuf, count, comm, &rc)) return rc;
    count_passthrough();
  }
  return PMPI_Allreduce_c(sendbuf, recvbuf, count, datatype, op, comm);
}
#endif

}  // extern "C"
