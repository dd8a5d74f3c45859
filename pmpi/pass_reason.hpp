// Why a reduction goes to the MPI untouched: the entry point's reasons (include/optireduce/engine.h),
// counted in the report's passthrough_by_reason.
#pragma once

#include "optireduce/engine.h"

namespace optireduce::pmpi {

enum class PassReason : int {
  datatype = OPTIREDUCE_PASS_DATATYPE,
  op = OPTIREDUCE_PASS_OP,
  communicator = OPTIREDUCE_PASS_COMMUNICATOR,
  arguments = OPTIREDUCE_PASS_ARGUMENTS,
  size = OPTIREDUCE_PASS_SIZE,
  mode_off = OPTIREDUCE_PASS_MODE_OFF,
  no_engine = OPTIREDUCE_PASS_NO_ENGINE,
  engine_failed = OPTIREDUCE_PASS_ENGINE_FAILED,
  nonblocking = OPTIREDUCE_PASS_NONBLOCKING,
  device_buffer = OPTIREDUCE_PASS_DEVICE_BUFFER,
  user_op_not_sum = OPTIREDUCE_PASS_USER_OP_NOT_SUM,
  user_op_unknown = OPTIREDUCE_PASS_USER_OP_UNKNOWN,
  user_op_disagreement = OPTIREDUCE_PASS_USER_OP_DISAGREEMENT,
};

}  // namespace optireduce::pmpi
