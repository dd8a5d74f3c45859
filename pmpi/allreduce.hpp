// The decision and the engine path shared by the C and Fortran entry points.
#pragma once

#include <mpi.h>

#include <chrono>
#include <cstdint>
#include <optional>

#include "optireduce/engine.h"
#include "optireduce/pass_reason.hpp"

namespace optireduce::pmpi {


// Why a communicator's reductions go to the MPI: an intercommunicator, fewer than 2 ranks.
std::optional<PassReason> communicator_reason(MPI_Comm comm);

// Why the call must go to PMPI_Allreduce (nullopt: it may run through the engine, with elements of
// *format, an OPTIREDUCE_FORMAT_*). Decides identically on every rank: it reads only arguments
// MPI requires to match across ranks, settings agreed at MPI_Init and, for a user op, the verdict
// the ranks agree on at its first use on the communicator (sum_format.hpp).
std::optional<PassReason> ineligible(const void* sendbuf, const void* recvbuf, std::int64_t count, MPI_Datatype datatype,
                                     MPI_Op op, MPI_Comm comm, int* format);

// Runs an eligible call through the communicator's engine and sets *result to the MPI return
// code; or returns why the call goes to PMPI instead (below OPTIREDUCE_MIN_BYTES, mode off, no
// engine, a failed engine, a device buffer on some rank), the same on every rank.
std::optional<PassReason> run_engine(const void* sendbuf, void* recvbuf, std::int64_t count, int format, MPI_Comm comm,
                                     int* result);

// Both, for a call of an initialised library that is not nested in a Fortran wrapper.
inline std::optional<PassReason> try_engine(const void* sendbuf, void* recvbuf, std::int64_t count, MPI_Datatype datatype,
                                            MPI_Op op, MPI_Comm comm, int* result) {
  int format = OPTIREDUCE_FORMAT_FLOAT32;
  if (auto why = ineligible(sendbuf, recvbuf, count, datatype, op, comm, &format)) return why;
  return run_engine(sendbuf, recvbuf, count, format, comm, result);
}

// Runs `forward` (the MPI's own call) and counts it as passed through for `why`, with its time,
// under its collective (enum optireduce_collective).
template <typename Forward>
auto pass_through(PassReason why, Forward&& forward, int collective = OPTIREDUCE_COLLECTIVE_ALLREDUCE) {
  const auto start = std::chrono::steady_clock::now();
  auto rc = forward();
  optireduce_record_passthrough_of(collective, static_cast<int>(why),
                                   std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start).count());
  return rc;
}

// A non-blocking call (MPI_Iallreduce, MPI_Ireduce_scatter*): never run by the engine, only counted.
void count_nonblocking(int collective = OPTIREDUCE_COLLECTIVE_ALLREDUCE);

}  // namespace optireduce::pmpi
