// The decision and the engine path shared by the C and Fortran entry points.
#pragma once

#include <mpi.h>

#include <cstdint>

namespace optireduce::pmpi {

// True when the call must run through the engine. Decides identically on every rank: it reads
// only arguments MPI requires to match across ranks and settings agreed at MPI_Init.
bool eligible(const void* sendbuf, const void* recvbuf, std::int64_t count, MPI_Datatype datatype, MPI_Op op,
              MPI_Comm comm);

// Runs an eligible call through the communicator's engine. Returns false when the communicator
// has no engine (creation failed on some rank), in which case the caller forwards to PMPI; else
// sets *result to the MPI return code.
bool run_engine(const void* sendbuf, void* recvbuf, std::int64_t count, MPI_Comm comm, int* result);

void count_passthrough();

}  // namespace optireduce::pmpi
