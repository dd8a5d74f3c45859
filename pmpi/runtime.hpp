// Process-wide state of the interposition layer: the hooks that run after MPI is initialised and
// before it is finalised, around the entry point's process state (settings, trace, report).
#pragma once

#include <mpi.h>

namespace optireduce::pmpi {

// After a successful PMPI_Init*: the entry point parses, validates and agrees the configuration
// over MPI_COMM_WORLD; then the communicator cache is set up. Idempotent. On a bad or mismatched
// setting it prints one line and ends the whole job with a non-zero exit.
void after_init();

// Before PMPI_Finalize: close every engine, gather and write the report. Idempotent.
void before_finalize();

// True between after_init() and before_finalize() when the engine may run at all.
bool active();
// True between after_init() and before_finalize(), whatever the mode.
bool initialized();

// Fortran wrappers set this while they run so that an MPI whose Fortran bindings call the C
// entry points (MPICH) does not see a call intercepted or counted twice.
struct NestedCallGuard {
  NestedCallGuard();
  ~NestedCallGuard();
  static bool nested();
};

}  // namespace optireduce::pmpi
