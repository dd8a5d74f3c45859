// Device buffers: a CUDA-aware MPI job may reduce device pointers, which the engine must never
// touch from the CPU. Where a CUDA driver is loaded in the process, the driver says what a
// pointer is (cuPointerGetAttribute, looked up at run time: the library never links or loads
// CUDA); where none is loaded anywhere, nothing is asked and no call is added.
#pragma once

#include <mpi.h>

namespace optireduce::pmpi {

// True when a CUDA driver is loaded in this process now (once true, it stays true).
bool cuda_driver_loaded();

// At MPI_Init: whether some rank of the job had a driver loaded (agreed by every rank).
void set_driver_on_some_rank(bool loaded);

// Collective over `comm` when a driver is loaded here or was on some rank at MPI_Init (one int
// PMPI_Allreduce), else no communication: true when some rank's send or receive buffer is
// device memory. Every rank of a CUDA job loads the driver before reducing device buffers, so
// the ranks take part alike.
bool any_device_buffer(const void* sendbuf, const void* recvbuf, MPI_Comm comm);

}  // namespace optireduce::pmpi
