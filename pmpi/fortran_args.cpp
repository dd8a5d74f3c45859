#include "fortran_args.hpp"

#include <array>
#include <cstring>

namespace optireduce::pmpi {
namespace {

template <typename Handle>
bool is_zero_handle(const Handle& h) {
  Handle zero{};
  return std::memcmp(&h, &zero, sizeof h) == 0;
}

}  // namespace

bool is_fortran_in_place(const void* p) {
  static const std::array<const void*, 4> blocks = [] {
    std::array<const void*, 4> a{};
    const char* names[] = {"mpi_fortran_in_place_", "mpi_fortran_in_place", "mpi_fortran_in_place__", "MPI_FORTRAN_IN_PLACE"};
    for (std::size_t i = 0; i < a.size(); ++i) a[i] = dlsym(RTLD_DEFAULT, names[i]);
    return a;
  }();
  for (const void* b : blocks)
    if (b && p == b) return true;
  static void* const* mpich = static_cast<void* const*>(dlsym(RTLD_DEFAULT, "MPIR_F_MPI_IN_PLACE"));
  return mpich && *mpich && p == *mpich;
}

std::optional<CHandles> c_handles(const MPI_Fint* datatype, const MPI_Fint* op, const MPI_Fint* comm) {
  const CHandles h{PMPI_Type_f2c(*datatype), PMPI_Op_f2c(*op), PMPI_Comm_f2c(*comm)};
  if (is_zero_handle(h.comm) || is_zero_handle(h.datatype) || is_zero_handle(h.op)) return std::nullopt;
  return h;
}

}  // namespace optireduce::pmpi
