// Fortran entry points of MPI_Op_create and MPI_Op_free (mpif.h, `use mpi`, `use mpi_f08`), so the
// op registry (user_ops.hpp) knows ops a Fortran program makes: Open MPI's Fortran bindings call
// PMPI_Op_create, never the C wrapper. Each forwards to the MPI's own binding of the same name;
// MPICH's, which calls the C entry point, runs nested, so the op is registered once, as Fortran.
#include <dlfcn.h>
#include <mpi.h>

#include "runtime.hpp"
#include "user_ops.hpp"

using namespace optireduce::pmpi;

namespace {

using FortranFunction = void (*)();
using OpCreateFn = void (*)(FortranFunction, MPI_Fint*, MPI_Fint*, MPI_Fint*);
using OpFreeFn = void (*)(MPI_Fint*, MPI_Fint*);

template <typename Fn>
Fn next_symbol(const char* name) {
  return reinterpret_cast<Fn>(dlsym(RTLD_NEXT, name));
}

// `commute` is a Fortran LOGICAL: non-zero is true for the compilers MPI supports.
void op_create(OpCreateFn real, FortranFunction function, MPI_Fint* commute, MPI_Fint* op, MPI_Fint* ierror) {
  MPI_Fint rc = MPI_SUCCESS;
  if (real) {
    NestedCallGuard guard;
    real(function, commute, op, &rc);
  } else {
    // No Fortran binding of this name in the MPI: the C one, which calls the function as C.
    MPI_Op c_op = MPI_OP_NULL;
    rc = PMPI_Op_create(reinterpret_cast<MPI_User_function*>(function), *commute != 0, &c_op);
    if (rc == MPI_SUCCESS) *op = PMPI_Op_c2f(c_op);
  }
  if (ierror) *ierror = rc;  // the f08 ierror is optional and may be absent
  if (rc == MPI_SUCCESS)
    register_user_op(PMPI_Op_f2c(*op), real ? UserOp::Convention::fortran : UserOp::Convention::c, function,
                     *commute != 0);
}

void op_free(OpFreeFn real, MPI_Fint* op, MPI_Fint* ierror) {
  MPI_Op c_op = PMPI_Op_f2c(*op);
  forget_user_op(c_op);
  if (real) {
    real(op, ierror);
    return;
  }
  const int rc = PMPI_Op_free(&c_op);
  if (rc == MPI_SUCCESS) *op = PMPI_Op_c2f(c_op);
  if (ierror) *ierror = rc;
}

}  // namespace

#define OR_FORTRAN_OP_CREATE(name)                                                        \
  extern "C" void name(FortranFunction f, MPI_Fint* commute, MPI_Fint* op, MPI_Fint* e) { \
    static const OpCreateFn real = next_symbol<OpCreateFn>(#name);                        \
    op_create(real, f, commute, op, e);                                                   \
  }
#define OR_FORTRAN_OP_FREE(name)                                  \
  extern "C" void name(MPI_Fint* op, MPI_Fint* e) {               \
    static const OpFreeFn real = next_symbol<OpFreeFn>(#name);    \
    op_free(real, op, e);                                         \
  }

OR_FORTRAN_OP_CREATE(mpi_op_create)
OR_FORTRAN_OP_CREATE(mpi_op_create_)
OR_FORTRAN_OP_CREATE(mpi_op_create__)
OR_FORTRAN_OP_CREATE(MPI_OP_CREATE)
OR_FORTRAN_OP_CREATE(mpi_op_create_f08_)
OR_FORTRAN_OP_FREE(mpi_op_free)
OR_FORTRAN_OP_FREE(mpi_op_free_)
OR_FORTRAN_OP_FREE(mpi_op_free__)
OR_FORTRAN_OP_FREE(MPI_OP_FREE)
OR_FORTRAN_OP_FREE(mpi_op_free_f08_)
