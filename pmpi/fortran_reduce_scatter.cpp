// Fortran entry points of mpif.h, `use mpi` and `use mpi_f08` for MPI_REDUCE_SCATTER_BLOCK and
// MPI_REDUCE_SCATTER (their non-blocking forms only counted), as fortran.cpp does for the
// allreduce: each wrapper runs the call itself or forwards to the MPI's own binding of that name.
#include <mpi.h>

#include <optional>

#include "fortran_args.hpp"
#include "reduce_scatter.hpp"
#include "runtime.hpp"

using namespace optireduce::pmpi;

namespace {

// (sendbuf, recvbuf, recvcount or recvcounts, datatype, op, comm, ierror)
using ReduceScatterFn = void (*)(void*, void*, MPI_Fint*, MPI_Fint*, MPI_Fint*, MPI_Fint*, MPI_Fint*);
// The same with a request before ierror.
using IreduceScatterFn = void (*)(void*, void*, MPI_Fint*, MPI_Fint*, MPI_Fint*, MPI_Fint*, MPI_Fint*, MPI_Fint*);

void* c_buffer(void* p) { return is_fortran_in_place(p) ? MPI_IN_PLACE : p; }

// `counts` points at the block count (block form) or at the recvcounts array.
void reduce_scatter(const char* name, bool block, ReduceScatterFn real, void* sendbuf, void* recvbuf, MPI_Fint* counts,
                    MPI_Fint* datatype, MPI_Fint* op, MPI_Fint* comm, MPI_Fint* ierror) {
  NestedCallGuard guard;
  auto forward = [&] {
    if (real) {
      real(sendbuf, recvbuf, counts, datatype, op, comm, ierror);
      return 0;
    }
    // No Fortran binding of this name in the MPI: do what it would have done.
    const MPI_Datatype t = PMPI_Type_f2c(*datatype);
    const MPI_Op o = PMPI_Op_f2c(*op);
    const MPI_Comm c = PMPI_Comm_f2c(*comm);
    set_ierror(ierror, block ? PMPI_Reduce_scatter_block(c_buffer(sendbuf), recvbuf, *counts, t, o, c)
                             : PMPI_Reduce_scatter(c_buffer(sendbuf), recvbuf, counts, t, o, c));
    return 0;
  };
  const BlockCounts blocks = block ? BlockCounts::every(*counts) : BlockCounts::per_rank(counts);
  serve_or_forward(datatype, op, comm, ierror, OPTIREDUCE_COLLECTIVE_REDUCE_SCATTER, [&](const CHandles& h, int* rc) {
    return try_reduce_scatter(name, c_buffer(sendbuf), recvbuf, blocks, h.datatype, h.op, h.comm, rc);
  }, forward);
}

void ireduce_scatter(bool block, IreduceScatterFn real, void* sendbuf, void* recvbuf, MPI_Fint* counts, MPI_Fint* datatype,
                     MPI_Fint* op, MPI_Fint* comm, MPI_Fint* request, MPI_Fint* ierror) {
  count_nonblocking(OPTIREDUCE_COLLECTIVE_REDUCE_SCATTER);
  NestedCallGuard guard;
  if (real) return real(sendbuf, recvbuf, counts, datatype, op, comm, request, ierror);
  MPI_Request r = MPI_REQUEST_NULL;
  const MPI_Datatype t = PMPI_Type_f2c(*datatype);
  const MPI_Op o = PMPI_Op_f2c(*op);
  const MPI_Comm c = PMPI_Comm_f2c(*comm);
  set_ierror(ierror, block ? PMPI_Ireduce_scatter_block(c_buffer(sendbuf), recvbuf, *counts, t, o, c, &r)
                           : PMPI_Ireduce_scatter(c_buffer(sendbuf), recvbuf, counts, t, o, c, &r));
  *request = PMPI_Request_c2f(r);
}

}  // namespace

#define OR_FORTRAN_REDUCE_SCATTER(name, block)                                                                  \
  extern "C" void name(void* s, void* r, MPI_Fint* n, MPI_Fint* t, MPI_Fint* o, MPI_Fint* c, MPI_Fint* e) {     \
    static const ReduceScatterFn real = next_symbol<ReduceScatterFn>(#name);                                    \
    reduce_scatter(block ? "MPI_REDUCE_SCATTER_BLOCK" : "MPI_REDUCE_SCATTER", block, real, s, r, n, t, o, c, e); \
  }
#define OR_FORTRAN_IREDUCE_SCATTER(name, block)                                                                            \
  extern "C" void name(void* s, void* r, MPI_Fint* n, MPI_Fint* t, MPI_Fint* o, MPI_Fint* c, MPI_Fint* q, MPI_Fint* e) { \
    static const IreduceScatterFn real = next_symbol<IreduceScatterFn>(#name);                                             \
    ireduce_scatter(block, real, s, r, n, t, o, c, q, e);                                                                  \
  }
#define OR_FORTRAN_REDUCE_SCATTER_BLOCK(name) OR_FORTRAN_REDUCE_SCATTER(name, true)
#define OR_FORTRAN_REDUCE_SCATTER_V(name) OR_FORTRAN_REDUCE_SCATTER(name, false)
#define OR_FORTRAN_IREDUCE_SCATTER_BLOCK(name) OR_FORTRAN_IREDUCE_SCATTER(name, true)
#define OR_FORTRAN_IREDUCE_SCATTER_V(name) OR_FORTRAN_IREDUCE_SCATTER(name, false)

OR_FORTRAN_ALL_MANGLINGS(OR_FORTRAN_REDUCE_SCATTER_BLOCK, mpi_reduce_scatter_block, MPI_REDUCE_SCATTER_BLOCK)
OR_FORTRAN_ALL_MANGLINGS(OR_FORTRAN_REDUCE_SCATTER_V, mpi_reduce_scatter, MPI_REDUCE_SCATTER)
OR_FORTRAN_ALL_MANGLINGS(OR_FORTRAN_IREDUCE_SCATTER_BLOCK, mpi_ireduce_scatter_block, MPI_IREDUCE_SCATTER_BLOCK)
OR_FORTRAN_ALL_MANGLINGS(OR_FORTRAN_IREDUCE_SCATTER_V, mpi_ireduce_scatter, MPI_IREDUCE_SCATTER)
