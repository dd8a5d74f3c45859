// One call through a communicator's engine, whichever collective it is (MPI_Allreduce,
// MPI_Reduce_scatter*): the engine's admission, the device-buffer agreement, the call, and a
// failure (agreed by every rank) turned into the communicator's error handler.
#pragma once

#include <mpi.h>

#include <cstdint>
#include <mutex>
#include <optional>

#include "allreduce.hpp"
#include "comm_engines.hpp"
#include "device_memory.hpp"

namespace optireduce::pmpi {

struct EngineCall {
  const char* name;      // the MPI function, for messages: "MPI_Allreduce"
  const char* mpi_path;  // where the communicator's calls go once one failed: "PMPI_Allreduce"
  std::uint64_t count;   // elements the engine admits the call by (a reduce-scatter's: all blocks)
  int format;            // enum optireduce_format
  const void* input;     // the buffers, for the device check
  const void* output;
};

// What a run of the engine returned (an optireduce_result with its reason), as the interposer
// answers it: nullopt with *result set (MPI_SUCCESS, or the error handler's code after an agreed
// failure), or why the call goes to the MPI.
std::optional<PassReason> engine_outcome(MPI_Comm comm, CommState& state, const EngineCall& call, int rc, int reason,
                                         int* result);

// Runs `run(engine, &reason)` (the entry point's call, an optireduce_result) when the engine
// admits `call` and no rank has a device buffer; every step decides alike on every rank.
template <typename Run>
std::optional<PassReason> run_on_engine(MPI_Comm comm, const EngineCall& call, Run&& run, int* result) {
  CommState& state = comm_state(comm);
  int reason = 0, rc = OPTIREDUCE_DECLINED;
  {
    std::lock_guard lock(state.mutex);
    if (!state.engine) return PassReason::no_engine;
    // Below OPTIREDUCE_MIN_BYTES, the communicator's mode off, an engine that failed: decided
    // before the device check, which costs a collective where CUDA is loaded.
    rc = optireduce_engine_accepts(state.engine, call.count, call.format, OPTIREDUCE_OP_SUM, &reason);
    if (rc == OPTIREDUCE_OK && any_device_buffer(call.input, call.output, comm)) return PassReason::device_buffer;
    if (rc == OPTIREDUCE_OK) rc = run(state.engine, &reason);
  }
  return engine_outcome(comm, state, call, rc, reason, result);
}

}  // namespace optireduce::pmpi
