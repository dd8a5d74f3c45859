// Why a reduction (MPI_Allreduce, MPI_Reduce_scatter*, their non-blocking forms) went to the MPI
// library untouched: the C entry point's reasons (OPTIREDUCE_PASS_*, include/optireduce/engine.h)
// as one C++ type, which the interposer returns and the report counts (passthrough_by_reason).
#pragma once

#include <cstddef>

#include "optireduce/engine.h"

namespace optireduce {

enum class PassReason : int {
  datatype = OPTIREDUCE_PASS_DATATYPE,  // not a float32, a named 16-bit float or a 2-byte carrier of a user op
  op = OPTIREDUCE_PASS_OP,              // not MPI_SUM
  communicator = OPTIREDUCE_PASS_COMMUNICATOR,  // an intercommunicator, or fewer than 2 ranks
  arguments = OPTIREDUCE_PASS_ARGUMENTS,  // arguments the MPI would reject (kept for its own error behaviour)
  size = OPTIREDUCE_PASS_SIZE,            // below OPTIREDUCE_MIN_BYTES
  mode_off = OPTIREDUCE_PASS_MODE_OFF,    // OPTIREDUCE_MODE=off or the communicator's mode
  no_engine = OPTIREDUCE_PASS_NO_ENGINE,  // the communicator's engine could not be created (on some rank)
  engine_failed = OPTIREDUCE_PASS_ENGINE_FAILED,  // an earlier engine call on the communicator failed
  nonblocking = OPTIREDUCE_PASS_NONBLOCKING,      // MPI_Iallreduce, MPI_Ireduce_scatter*: never intercepted
  device_buffer = OPTIREDUCE_PASS_DEVICE_BUFFER,  // a device pointer (CUDA) on some rank of the communicator
  user_op_not_sum = OPTIREDUCE_PASS_USER_OP_NOT_SUM,  // 2-byte elements, a user op whose probe found no fp16/bf16 sum
  user_op_unknown = OPTIREDUCE_PASS_USER_OP_UNKNOWN,  // 2-byte elements, a user op whose creation the library did not see
  user_op_disagreement = OPTIREDUCE_PASS_USER_OP_DISAGREEMENT,  // 2-byte elements, the ranks' probes of a user op disagreed
  count_
};
// The reasons are numbered from 0 without gaps: the report counts them in an array.
inline constexpr std::size_t kPassReasons = static_cast<std::size_t>(PassReason::count_);
static_assert(OPTIREDUCE_PASS_DATATYPE == 0 && kPassReasons == std::size_t{OPTIREDUCE_PASS_USER_OP_DISAGREEMENT} + 1);

}  // namespace optireduce
