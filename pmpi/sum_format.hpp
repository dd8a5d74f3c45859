// What the (datatype, op) of a reduction is to the engine: a sum of float32, float16 or bfloat16
// elements, or the reason it goes to the MPI. Shared by every interposed collective (allreduce,
// reduce-scatter). Two steps, so that a caller keeps its own checks in between:
//
//   SumFormat f = classify_sum(datatype, op);               // local, no communication
//   if (f.pass) -> pass through for *f.pass
//   ... the caller's checks that decide alike on every rank (arguments, an intracommunicator of
//       at least 2 ranks) ...
//   if (auto why = settle_sum(f, datatype, op, comm)) -> pass through for *why
//   f.format is the element format (OPTIREDUCE_FORMAT_*)
//
// Recognised: MPI_FLOAT, MPI_REAL, MPI_REAL4 (4 bytes) with MPI_SUM; a named 16-bit float of the
// MPI built for (MPICH's MPIX_C_FLOAT16) with MPI_SUM; and 2-byte elements (such a named float, a
// named 2-byte integer, or MPI_Type_contiguous / MPI_Type_dup down to bytes or a 2-byte integer:
// Horovod's and mpi4py's carrier of fp16) with a commutative op made by MPI_Op_create whose
// function, run once on known inputs, is an fp16 sum or a bf16 sum (op_probe.hpp). That last
// verdict is agreed by every rank of the communicator, once per (communicator, op): the first
// time settle_sum meets the op on a communicator it probes and makes one PMPI_Allreduce of two
// ints there; later calls read the cached verdict.
#pragma once

#include <mpi.h>

#include <cstdint>
#include <optional>

#include "optireduce/pass_reason.hpp"

namespace optireduce::pmpi {

struct SumFormat {
  std::optional<PassReason> pass;       // set: the call goes to the MPI for this reason
  int format = OPTIREDUCE_FORMAT_FLOAT32;
  std::uint64_t user_op_serial = 0;     // non-zero: a user op whose verdict settle_sum agrees on
  bool named_float16 = false;           // the datatype is a named fp16: only an fp16 sum may serve it
};

// Local: reads the handles only (datatype envelope, size and extent; the op registry).
SumFormat classify_sum(MPI_Datatype datatype, MPI_Op op);

// For a user op: collective over `comm` the first time the op meets it (every rank of comm must be
// in this call, and reach it alike); sets format, or returns why the call passes through, the
// same on every rank. For anything else: returns nullopt and makes no call.
std::optional<PassReason> settle_sum(SumFormat& format, MPI_Datatype datatype, MPI_Op op, MPI_Comm comm);

// "float32", "float16", "bfloat16" for an OPTIREDUCE_FORMAT_*, for messages.
const char* format_name(int format);

}  // namespace optireduce::pmpi
