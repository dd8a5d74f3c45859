// C entry points: MPI_Allreduce (and MPI_Allreduce_c where the MPI declares it), and
// MPI_Iallreduce, which only counts.
#include "allreduce.hpp"

#include "comm_engines.hpp"
#include "device_memory.hpp"
#include "optireduce/engine/log.hpp"
#include "runtime.hpp"

namespace optireduce::pmpi {

std::optional<PassReason> ineligible(const void* sendbuf, const void* recvbuf, std::int64_t count, MPI_Datatype datatype,
                                     MPI_Op op, MPI_Comm comm) {
  if (datatype != MPI_FLOAT) {
    // Fortran REAL is its own handle; it is 4 bytes unless the program was built with a
    // default-real-8 flag, which the size check catches.
    if (datatype != MPI_REAL && datatype != MPI_REAL4) return PassReason::datatype;
    int size = 0;
    if (PMPI_Type_size(datatype, &size) != MPI_SUCCESS || size != 4) return PassReason::datatype;
  }
  if (op != MPI_SUM) return PassReason::op;
  // Arguments PMPI would reject keep PMPI's error behaviour.
  if (comm == MPI_COMM_NULL || count < 0 || (count > 0 && (recvbuf == nullptr || sendbuf == recvbuf)))
    return PassReason::arguments;
  int inter = 0, size = 0;
  if (PMPI_Comm_test_inter(comm, &inter) != MPI_SUCCESS || PMPI_Comm_size(comm, &size) != MPI_SUCCESS)
    return PassReason::arguments;
  if (inter || size < 2) return PassReason::communicator;
  if (static_cast<std::uint64_t>(count) * sizeof(float) < config().min_bytes) return PassReason::size;
  return std::nullopt;
}

std::optional<PassReason> run_engine(const void* sendbuf, void* recvbuf, std::int64_t count, MPI_Comm comm, int* result) {
  CommState& state = comm_state(comm);
  const float* input = static_cast<const float*>(sendbuf == MPI_IN_PLACE ? recvbuf : sendbuf);
  CallStats stats;
  {
    std::lock_guard lock(state.mutex);
    const Mode mode = state.mode.value_or(config().mode);
    if (mode == Mode::off) return PassReason::mode_off;
    if (state.engine_failed) return PassReason::engine_failed;
    if (any_device_buffer(input, recvbuf, comm)) return PassReason::device_buffer;
    Engine* engine = comm_engine(state, config());
    if (!engine) return PassReason::no_engine;
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
  const bool bounded = stats.kind == CallKind::bounded;
  ProcessStats::instance().record_intercepted({static_cast<std::uint64_t>(count) * sizeof(float), stats.entries,
                                               stats.dropped_entries, stats.latency_us, bounded,
                                               stats.kind == CallKind::fallback,
                                               stats.deadline_us[0] + stats.deadline_us[1], bounded && stats.cut,
                                               stats.kind == CallKind::mpi});
  trace_call(stats);
  if (!stats.ok()) {
    // Never hang and never return wrong data silently: the communicator's error handler decides
    // (MPI_ERRORS_ARE_FATAL, the default, ends the job).
    *result = MPI_ERR_OTHER;
    PMPI_Comm_call_errhandler(comm, MPI_ERR_OTHER);
    return std::nullopt;
  }
  *result = MPI_SUCCESS;
  return std::nullopt;
}

void count_nonblocking() {
  if (active() && !NestedCallGuard::nested()) ProcessStats::instance().record_passthrough(PassReason::nonblocking);
}

}  // namespace optireduce::pmpi

using namespace optireduce::pmpi;

namespace {

template <typename Count, typename Forward>
int allreduce(const void* sendbuf, void* recvbuf, Count count, MPI_Datatype datatype, MPI_Op op, MPI_Comm comm,
              Forward&& forward) {
  if (NestedCallGuard::nested() || !active()) return forward();
  int rc = MPI_SUCCESS;
  const auto why = try_engine(sendbuf, recvbuf, static_cast<std::int64_t>(count), datatype, op, comm, &rc);
  return why ? pass_through(*why, forward) : rc;
}

}  // namespace

extern "C" {

int MPI_Allreduce(const void* sendbuf, void* recvbuf, int count, MPI_Datatype datatype, MPI_Op op, MPI_Comm comm) {
  return allreduce(sendbuf, recvbuf, count, datatype, op, comm,
                   [&] { return PMPI_Allreduce(sendbuf, recvbuf, count, datatype, op, comm); });
}

int MPI_Iallreduce(const void* sendbuf, void* recvbuf, int count, MPI_Datatype datatype, MPI_Op op, MPI_Comm comm,
                   MPI_Request* request) {
  count_nonblocking();
  return PMPI_Iallreduce(sendbuf, recvbuf, count, datatype, op, comm, request);
}

#if MPI_VERSION >= 4
int MPI_Allreduce_c(const void* sendbuf, void* recvbuf, MPI_Count count, MPI_Datatype datatype, MPI_Op op, MPI_Comm comm) {
  return allreduce(sendbuf, recvbuf, count, datatype, op, comm,
                   [&] { return PMPI_Allreduce_c(sendbuf, recvbuf, count, datatype, op, comm); });
}

int MPI_Iallreduce_c(const void* sendbuf, void* recvbuf, MPI_Count count, MPI_Datatype datatype, MPI_Op op, MPI_Comm comm,
                     MPI_Request* request) {
  count_nonblocking();
  return PMPI_Iallreduce_c(sendbuf, recvbuf, count, datatype, op, comm, request);
}
#endif

}  // extern "C"
