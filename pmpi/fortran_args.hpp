// What every Fortran wrapper needs: the MPI's own binding of the same name, Fortran's
// MPI_IN_PLACE, the C handles of Fortran ones, and the optional ierror.
#pragma once

#include <dlfcn.h>
#include <mpi.h>

#include <optional>

#include "allreduce.hpp"
#include "runtime.hpp"

namespace optireduce::pmpi {

// The MPI's Fortran binding of this name, or null where the MPI has none.
template <typename Fn>
Fn next_symbol(const char* name) {
  return reinterpret_cast<Fn>(dlsym(RTLD_NEXT, name));
}

// The Fortran MPI_IN_PLACE is an address the MPI library defines: Open MPI's common block
// symbols, or MPICH's pointer set during initialisation.
bool is_fortran_in_place(const void* p);

// The f08 ierror is optional and may be absent.
inline void set_ierror(MPI_Fint* ierror, int rc) {
  if (ierror) *ierror = static_cast<MPI_Fint>(rc);
}

struct CHandles {
  MPI_Datatype datatype;
  MPI_Op op;
  MPI_Comm comm;
};
// The C handles of a reduction's Fortran ones; nullopt when one does not translate (left for
// the MPI to reject).
std::optional<CHandles> c_handles(const MPI_Fint* datatype, const MPI_Fint* op, const MPI_Fint* comm);

// What every Fortran reduction wrapper does: `attempt(handles, &rc)` (the C path's try, nullopt
// when the engine served the call) once the library is active and the handles translate, else,
// or when it passes, `forward()` (the MPI's own binding), counted under `collective`.
template <typename Attempt, typename Forward>
void serve_or_forward(const MPI_Fint* datatype, const MPI_Fint* op, const MPI_Fint* comm, MPI_Fint* ierror, int collective,
                      Attempt&& attempt, Forward&& forward) {
  if (!active()) {
    forward();
    return;
  }
  std::optional<PassReason> why = PassReason::arguments;
  if (const auto h = c_handles(datatype, op, comm)) {
    int rc = MPI_SUCCESS;
    why = attempt(*h, &rc);
    if (!why) {
      set_ierror(ierror, rc);
      return;
    }
  }
  pass_through(*why, forward, collective);
}

}  // namespace optireduce::pmpi

// One wrapper per mangled name of the Fortran compilers (lower, lower_, lower__, UPPER), and one
// for `use mpi_f08` (Open MPI's lower_f08_: the same arguments, handles are one-integer derived
// types, ierror optional).
#define OR_FORTRAN_ALL_MANGLINGS(MACRO, lower, upper) \
  MACRO(lower) MACRO(lower##_) MACRO(lower##__) MACRO(upper) MACRO(lower##_f08_)
