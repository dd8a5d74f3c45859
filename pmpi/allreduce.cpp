// C entry points: MPI_Allreduce (and MPI_Allreduce_c where the MPI declares it), and
// MPI_Iallreduce, which only counts.
#include "allreduce.hpp"

#include "engine_call.hpp"
#include "runtime.hpp"
#include "sum_format.hpp"

namespace optireduce::pmpi {

std::optional<PassReason> ineligible(const void* sendbuf, const void* recvbuf, std::int64_t count, MPI_Datatype datatype,
                                     MPI_Op op, MPI_Comm comm, int* format) {
  SumFormat sum = classify_sum(datatype, op);
  if (sum.pass) return sum.pass;
  // Arguments PMPI would reject keep PMPI's error behaviour.
  if (comm == MPI_COMM_NULL || count < 0 || (count > 0 && (recvbuf == nullptr || sendbuf == recvbuf)))
    return PassReason::arguments;
  if (auto why = communicator_reason(comm)) return why;
  if (auto why = settle_sum(sum, datatype, op, comm)) return why;
  *format = sum.format;
  return std::nullopt;
}

std::optional<PassReason> communicator_reason(MPI_Comm comm) {
  int inter = 0, size = 0;
  if (PMPI_Comm_test_inter(comm, &inter) != MPI_SUCCESS || PMPI_Comm_size(comm, &size) != MPI_SUCCESS)
    return PassReason::arguments;
  if (inter || size < 2) return PassReason::communicator;
  return std::nullopt;
}

std::optional<PassReason> run_engine(const void* sendbuf, void* recvbuf, std::int64_t count, int format, MPI_Comm comm,
                                     int* result) {
  const void* input = sendbuf == MPI_IN_PLACE ? recvbuf : sendbuf;
  const auto n = static_cast<std::uint64_t>(count);
  const EngineCall call{"MPI_Allreduce", "PMPI_Allreduce", n, format, input, recvbuf};
  return run_on_engine(
      comm, call,
      [&](optireduce_engine* engine, int* reason) {
        return optireduce_engine_allreduce(engine, input, recvbuf, n, format, OPTIREDUCE_OP_SUM, reason);
      },
      result);
}

void count_nonblocking(int collective) {
  if (active() && !NestedCallGuard::nested()) optireduce_record_passthrough_of(collective, OPTIREDUCE_PASS_NONBLOCKING, 0);
}

}  // namespace optireduce::pmpi

using namespace optireduce::pmpi;

namespace {

// MPI_Allreduce and MPI_Allreduce_c: through the engine where eligible, else to `pmpi`.
template <typename Count>
int allreduce(const void* sendbuf, void* recvbuf, Count count, MPI_Datatype datatype, MPI_Op op, MPI_Comm comm,
              int (*pmpi)(const void*, void*, Count, MPI_Datatype, MPI_Op, MPI_Comm)) {
  auto forward = [&] { return pmpi(sendbuf, recvbuf, count, datatype, op, comm); };
  if (NestedCallGuard::nested() || !active()) return forward();
  int rc = MPI_SUCCESS;
  const auto why = try_engine(sendbuf, recvbuf, static_cast<std::int64_t>(count), datatype, op, comm, &rc);
  return why ? pass_through(*why, forward) : rc;
}

// MPI_Iallreduce and MPI_Iallreduce_c: counted, then `pmpi`'s.
template <typename Count>
int iallreduce(const void* sendbuf, void* recvbuf, Count count, MPI_Datatype datatype, MPI_Op op, MPI_Comm comm,
               MPI_Request* request, int (*pmpi)(const void*, void*, Count, MPI_Datatype, MPI_Op, MPI_Comm, MPI_Request*)) {
  count_nonblocking();
  return pmpi(sendbuf, recvbuf, count, datatype, op, comm, request);
}

}  // namespace

extern "C" {

int MPI_Allreduce(const void* sendbuf, void* recvbuf, int count, MPI_Datatype datatype, MPI_Op op, MPI_Comm comm) {
  return allreduce(sendbuf, recvbuf, count, datatype, op, comm, &PMPI_Allreduce);
}

int MPI_Iallreduce(const void* sendbuf, void* recvbuf, int count, MPI_Datatype datatype, MPI_Op op, MPI_Comm comm,
                   MPI_Request* request) {
  return iallreduce(sendbuf, recvbuf, count, datatype, op, comm, request, &PMPI_Iallreduce);
}

#if MPI_VERSION >= 4
int MPI_Allreduce_c(const void* sendbuf, void* recvbuf, MPI_Count count, MPI_Datatype datatype, MPI_Op op, MPI_Comm comm) {
  return allreduce(sendbuf, recvbuf, count, datatype, op, comm, &PMPI_Allreduce_c);
}

int MPI_Iallreduce_c(const void* sendbuf, void* recvbuf, MPI_Count count, MPI_Datatype datatype, MPI_Op op, MPI_Comm comm,
                     MPI_Request* request) {
  return iallreduce(sendbuf, recvbuf, count, datatype, op, comm, request, &PMPI_Iallreduce_c);
}
#endif

}  // extern "C"
