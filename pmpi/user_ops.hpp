// The ops the job made with MPI_Op_create (C, and Fortran where its binding bypasses the C entry
// point: fortran_ops.cpp): each op's function, calling convention and commutativity, so that
// sum_format.cpp can run the function once on known inputs (op_probe.hpp). An op leaves the
// registry at MPI_Op_free, before its handle can be reused; each registration has its own serial,
// which is what per-communicator verdicts are cached under.
#pragma once

#include <mpi.h>

#include <cstdint>
#include <optional>

#include "op_probe.hpp"

namespace optireduce::pmpi {

struct UserOp {
  enum class Convention {
    c,            // MPI_User_function: (void*, void*, int*, MPI_Datatype*)
    c_large,      // MPI_User_function_c: (void*, void*, MPI_Count*, MPI_Datatype*)
    fortran,      // (void*, void*, MPI_Fint*, MPI_Fint*): the datatype as its Fortran handle
  };
  std::uint64_t serial = 0;
  Convention convention = Convention::c;
  void (*function)() = nullptr;  // of the convention's type
  bool commutative = true;
};

// After a successful creation (the C wrappers call it themselves, unless nested in a Fortran one).
void register_user_op(MPI_Op op, UserOp::Convention convention, void (*function)(), int commute);
// Before the MPI frees it. Unknown ops are ignored.
void forget_user_op(MPI_Op op);
std::optional<UserOp> find_user_op(MPI_Op op);

// Probes the op's function as MPI would call it for elements of `datatype` (2 bytes each).
SumVerdict probe_user_op(const UserOp& op, MPI_Datatype datatype);

}  // namespace optireduce::pmpi
