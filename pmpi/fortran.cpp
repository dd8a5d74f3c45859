// Fortran entry points of mpif.h, `use mpi` and `use mpi_f08` for init, init_thread, finalize,
// allreduce and iallreduce (only counted); the reduce-scatters are in fortran_reduce_scatter.cpp.
// Open MPI's Fortran bindings call PMPI_* directly, so without these a Fortran job would never
// reach the C wrappers. Each wrapper either runs the call itself or forwards to the
// MPI's own Fortran binding of the same name, which keeps its error behaviour exactly.
#include <mpi.h>

#include <optional>

#include "allreduce.hpp"
#include "fortran_args.hpp"
#include "runtime.hpp"

using namespace optireduce::pmpi;

namespace {

using AllreduceFn = void (*)(void*, void*, MPI_Fint*, MPI_Fint*, MPI_Fint*, MPI_Fint*, MPI_Fint*);
using IallreduceFn = void (*)(void*, void*, MPI_Fint*, MPI_Fint*, MPI_Fint*, MPI_Fint*, MPI_Fint*, MPI_Fint*);
using InitFn = void (*)(MPI_Fint*);
using InitThreadFn = void (*)(MPI_Fint*, MPI_Fint*, MPI_Fint*);
using FinalizeFn = void (*)(MPI_Fint*);

void allreduce(AllreduceFn real, void* sendbuf, void* recvbuf, MPI_Fint* count, MPI_Fint* datatype, MPI_Fint* op,
               MPI_Fint* comm, MPI_Fint* ierror) {
  NestedCallGuard guard;
  auto forward = [&] {
    if (real) real(sendbuf, recvbuf, count, datatype, op, comm, ierror);
    // No Fortran binding of this name in the MPI: do what it would have done.
    else set_ierror(ierror, PMPI_Allreduce(is_fortran_in_place(sendbuf) ? MPI_IN_PLACE : sendbuf, recvbuf, *count,
                                           PMPI_Type_f2c(*datatype), PMPI_Op_f2c(*op), PMPI_Comm_f2c(*comm)));
    return 0;
  };
  serve_or_forward(datatype, op, comm, ierror, OPTIREDUCE_COLLECTIVE_ALLREDUCE, [&](const CHandles& h, int* rc) {
    return try_engine(is_fortran_in_place(sendbuf) ? MPI_IN_PLACE : sendbuf, recvbuf, *count, h.datatype, h.op, h.comm, rc);
  }, forward);
}

void iallreduce(IallreduceFn real, void* sendbuf, void* recvbuf, MPI_Fint* count, MPI_Fint* datatype, MPI_Fint* op,
                MPI_Fint* comm, MPI_Fint* request, MPI_Fint* ierror) {
  count_nonblocking();
  NestedCallGuard guard;
  if (real) return real(sendbuf, recvbuf, count, datatype, op, comm, request, ierror);
  MPI_Request r = MPI_REQUEST_NULL;
  set_ierror(ierror, PMPI_Iallreduce(is_fortran_in_place(sendbuf) ? MPI_IN_PLACE : sendbuf, recvbuf, *count,
                                     PMPI_Type_f2c(*datatype), PMPI_Op_f2c(*op), PMPI_Comm_f2c(*comm), &r));
  *request = PMPI_Request_c2f(r);
}

void init(InitFn real, MPI_Fint* ierror) {
  {
    NestedCallGuard guard;
    if (real) real(ierror);
    else set_ierror(ierror, PMPI_Init(nullptr, nullptr));
  }
  int initialized = 0;
  PMPI_Initialized(&initialized);
  if (initialized && (!ierror || *ierror == MPI_SUCCESS)) after_init();
}

void init_thread(InitThreadFn real, MPI_Fint* required, MPI_Fint* provided, MPI_Fint* ierror) {
  {
    NestedCallGuard guard;
    if (real) {
      real(required, provided, ierror);
    } else {
      int p = 0;
      set_ierror(ierror, PMPI_Init_thread(nullptr, nullptr, *required, &p));
      *provided = p;
    }
  }
  int initialized = 0;
  PMPI_Initialized(&initialized);
  if (initialized && (!ierror || *ierror == MPI_SUCCESS)) after_init();
}

void finalize(FinalizeFn real, MPI_Fint* ierror) {
  before_finalize();
  NestedCallGuard guard;
  if (real) real(ierror);
  else set_ierror(ierror, PMPI_Finalize());
}

}  // namespace

// One wrapper per mangled name; each forwards to the MPI's symbol of the same name.
#define OR_FORTRAN_ALLREDUCE(name)                                                                   \
  extern "C" void name(void* s, void* r, MPI_Fint* n, MPI_Fint* t, MPI_Fint* o, MPI_Fint* c, MPI_Fint* e) { \
    static const AllreduceFn real = next_symbol<AllreduceFn>(#name);                                         \
    allreduce(real, s, r, n, t, o, c, e);                                                                    \
  }
#define OR_FORTRAN_IALLREDUCE(name)                                                                          \
  extern "C" void name(void* s, void* r, MPI_Fint* n, MPI_Fint* t, MPI_Fint* o, MPI_Fint* c, MPI_Fint* q, MPI_Fint* e) { \
    static const IallreduceFn real = next_symbol<IallreduceFn>(#name);                                                 \
    iallreduce(real, s, r, n, t, o, c, q, e);                                                                          \
  }
#define OR_FORTRAN_INIT(name)                           \
  extern "C" void name(MPI_Fint* e) {                           \
    static const InitFn real = next_symbol<InitFn>(#name);      \
    init(real, e);                                              \
  }
#define OR_FORTRAN_INIT_THREAD(name)                                  \
  extern "C" void name(MPI_Fint* required, MPI_Fint* provided, MPI_Fint* e) { \
    static const InitThreadFn real = next_symbol<InitThreadFn>(#name);        \
    init_thread(real, required, provided, e);                                 \
  }
#define OR_FORTRAN_FINALIZE(name)                           \
  extern "C" void name(MPI_Fint* e) {                               \
    static const FinalizeFn real = next_symbol<FinalizeFn>(#name);  \
    finalize(real, e);                                              \
  }

OR_FORTRAN_ALL_MANGLINGS(OR_FORTRAN_ALLREDUCE, mpi_allreduce, MPI_ALLREDUCE)
OR_FORTRAN_ALL_MANGLINGS(OR_FORTRAN_IALLREDUCE, mpi_iallreduce, MPI_IALLREDUCE)
OR_FORTRAN_ALL_MANGLINGS(OR_FORTRAN_INIT, mpi_init, MPI_INIT)
OR_FORTRAN_ALL_MANGLINGS(OR_FORTRAN_INIT_THREAD, mpi_init_thread, MPI_INIT_THREAD)
OR_FORTRAN_ALL_MANGLINGS(OR_FORTRAN_FINALIZE, mpi_finalize, MPI_FINALIZE)
