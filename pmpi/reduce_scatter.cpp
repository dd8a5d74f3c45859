// C entry points: MPI_Reduce_scatter_block and MPI_Reduce_scatter (and their _c forms where the
// MPI declares them); MPI_Ireduce_scatter_block and MPI_Ireduce_scatter, which only count.
#include "reduce_scatter.hpp"

#include <vector>

#include "engine_call.hpp"
#include "runtime.hpp"
#include "sum_format.hpp"

namespace optireduce::pmpi {

std::optional<PassReason> try_reduce_scatter(const char* name, const void* sendbuf, void* recvbuf, const BlockCounts& counts,
                                             MPI_Datatype datatype, MPI_Op op, MPI_Comm comm, int* result) {
  // The same sums as the allreduce's: float32, a named fp16, or 2-byte elements with a user op
  // the ranks agree is an fp16 or bf16 sum (sum_format.hpp).
  SumFormat sum = classify_sum(datatype, op);
  if (sum.pass) return sum.pass;
  if (comm == MPI_COMM_NULL || !counts.present()) return PassReason::arguments;
  if (auto why = communicator_reason(comm)) return why;
  int rank = 0, ranks = 0;
  PMPI_Comm_rank(comm, &rank);
  PMPI_Comm_size(comm, &ranks);
  std::vector<std::uint64_t> blocks(static_cast<std::size_t>(ranks));
  std::uint64_t total = 0;
  for (int p = 0; p < ranks; ++p) {
    const std::int64_t n = counts.of(p);
    if (n < 0) return PassReason::arguments;
    total += blocks[static_cast<std::size_t>(p)] = static_cast<std::uint64_t>(n);
  }
  // Collective the first time a user op meets the communicator: every rank is here alike.
  if (auto why = settle_sum(sum, datatype, op, comm)) return why;
  // Arguments the MPI would reject keep its error behaviour: only an erroneous program differs
  // between ranks here (a rank whose block is empty may pass no receive buffer).
  const bool in_place = sendbuf == MPI_IN_PLACE;
  const void* input = in_place ? recvbuf : sendbuf;
  const bool own_block = blocks[static_cast<std::size_t>(rank)] > 0;
  if (total > 0 && (input == nullptr || (!in_place && sendbuf == recvbuf))) return PassReason::arguments;
  if (own_block && recvbuf == nullptr) return PassReason::arguments;
  const EngineCall call{name, "the MPI", total, sum.format, input, recvbuf};
  return run_on_engine(
      comm, call,
      [&](optireduce_engine* engine, int* reason) {
        return optireduce_engine_reduce_scatter(engine, input, recvbuf, blocks.data(), sum.format, OPTIREDUCE_OP_SUM, reason);
      },
      result);
}

}  // namespace optireduce::pmpi

using namespace optireduce::pmpi;

namespace {

template <typename Forward>
int reduce_scatter(const char* name, const void* sendbuf, void* recvbuf, const BlockCounts& counts, MPI_Datatype datatype,
                   MPI_Op op, MPI_Comm comm, Forward&& forward) {
  if (NestedCallGuard::nested() || !active()) return forward();
  int rc = MPI_SUCCESS;
  const auto why = try_reduce_scatter(name, sendbuf, recvbuf, counts, datatype, op, comm, &rc);
  return why ? pass_through(*why, forward, OPTIREDUCE_COLLECTIVE_REDUCE_SCATTER) : rc;
}

// One body for the int and MPI_Count (_c) entry point of each form; `pmpi` is the MPI's own.
template <typename Count>
int reduce_scatter_block(const char* name, int (*pmpi)(const void*, void*, Count, MPI_Datatype, MPI_Op, MPI_Comm),
                         const void* sendbuf, void* recvbuf, Count recvcount, MPI_Datatype datatype, MPI_Op op, MPI_Comm comm) {
  return reduce_scatter(name, sendbuf, recvbuf, BlockCounts::every(recvcount), datatype, op, comm,
                        [&] { return pmpi(sendbuf, recvbuf, recvcount, datatype, op, comm); });
}

template <typename Count>
int reduce_scatter_vector(const char* name, int (*pmpi)(const void*, void*, const Count*, MPI_Datatype, MPI_Op, MPI_Comm),
                          const void* sendbuf, void* recvbuf, const Count* recvcounts, MPI_Datatype datatype, MPI_Op op,
                          MPI_Comm comm) {
  return reduce_scatter(name, sendbuf, recvbuf, BlockCounts::per_rank(recvcounts), datatype, op, comm,
                        [&] { return pmpi(sendbuf, recvbuf, recvcounts, datatype, op, comm); });
}

}  // namespace

extern "C" {

int MPI_Reduce_scatter_block(const void* sendbuf, void* recvbuf, int recvcount, MPI_Datatype datatype, MPI_Op op,
                             MPI_Comm comm) {
  return reduce_scatter_block("MPI_Reduce_scatter_block", PMPI_Reduce_scatter_block, sendbuf, recvbuf, recvcount, datatype,
                              op, comm);
}

int MPI_Reduce_scatter(const void* sendbuf, void* recvbuf, const int recvcounts[], MPI_Datatype datatype, MPI_Op op,
                       MPI_Comm comm) {
  return reduce_scatter_vector("MPI_Reduce_scatter", PMPI_Reduce_scatter, sendbuf, recvbuf, recvcounts, datatype, op, comm);
}

int MPI_Ireduce_scatter_block(const void* sendbuf, void* recvbuf, int recvcount, MPI_Datatype datatype, MPI_Op op,
                              MPI_Comm comm, MPI_Request* request) {
  count_nonblocking(OPTIREDUCE_COLLECTIVE_REDUCE_SCATTER);
  return PMPI_Ireduce_scatter_block(sendbuf, recvbuf, recvcount, datatype, op, comm, request);
}

int MPI_Ireduce_scatter(const void* sendbuf, void* recvbuf, const int recvcounts[], MPI_Datatype datatype, MPI_Op op,
                        MPI_Comm comm, MPI_Request* request) {
  count_nonblocking(OPTIREDUCE_COLLECTIVE_REDUCE_SCATTER);
  return PMPI_Ireduce_scatter(sendbuf, recvbuf, recvcounts, datatype, op, comm, request);
}

#if MPI_VERSION >= 4
int MPI_Reduce_scatter_block_c(const void* sendbuf, void* recvbuf, MPI_Count recvcount, MPI_Datatype datatype, MPI_Op op,
                               MPI_Comm comm) {
  return reduce_scatter_block("MPI_Reduce_scatter_block_c", PMPI_Reduce_scatter_block_c, sendbuf, recvbuf, recvcount,
                              datatype, op, comm);
}

int MPI_Reduce_scatter_c(const void* sendbuf, void* recvbuf, const MPI_Count recvcounts[], MPI_Datatype datatype, MPI_Op op,
                         MPI_Comm comm) {
  return reduce_scatter_vector("MPI_Reduce_scatter_c", PMPI_Reduce_scatter_c, sendbuf, recvbuf, recvcounts, datatype, op,
                               comm);
}
#endif

}  // extern "C"
