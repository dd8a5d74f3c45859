// Process-wide state of the interposition layer: the validated configuration and the hooks that
// run after MPI is initialised and before it is finalised.
#pragma once

#include <mpi.h>

#include "optireduce/engine/config/config.hpp"
#include "optireduce/engine/engine/engine.hpp"

namespace optireduce::pmpi {

// After a successful PMPI_Init*: parse and validate the configuration, agree on it across
// MPI_COMM_WORLD, set up the communicator cache. Idempotent. On a bad or mismatched setting it
// prints one line and ends the whole job with a non-zero exit.
void after_init();

// Before PMPI_Finalize: tear down every engine, gather and write the report. Idempotent.
void before_finalize();

// True between after_init() and before_finalize() when the engine may run at all.
bool active();
// True between after_init() and before_finalize(), whatever the mode.
bool initialized();
// Appends the call to OPTIREDUCE_TRACE when it is set.
void trace_call(const CallStats& call);

const Config& config();

// Fortran wrappers set this while they run so that an MPI whose Fortran bindings call the C
// entry points (MPICH) does not see a call intercepted or counted twice.
struct NestedCallGuard {
  NestedCallGuard();
  ~NestedCallGuard();
  static bool nested();
};

}  // namespace optireduce::pmpi
