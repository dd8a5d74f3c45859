// C entry points: MPI_Init, MPI_Init_thread, MPI_Finalize. Nothing happens before MPI_Init: the
// library is also preloaded into mpirun, its daemons and interpreters that never call it.
#include "runtime.hpp"

using namespace optireduce::pmpi;

extern "C" {

int MPI_Init(int* argc, char*** argv) {
  const int rc = PMPI_Init(argc, argv);
  if (rc == MPI_SUCCESS && !NestedCallGuard::nested()) after_init();
  return rc;
}

int MPI_Init_thread(int* argc, char*** argv, int required, int* provided) {
  const int rc = PMPI_Init_thread(argc, argv, required, provided);
  if (rc == MPI_SUCCESS && !NestedCallGuard::nested()) after_init();
  return rc;
}

int MPI_Finalize(void) {
  // Before PMPI_Finalize: Open MPI runs MPI_COMM_WORLD's attribute callbacks inside it, where
  // no MPI call may be made.
  if (!NestedCallGuard::nested()) before_finalize();
  return PMPI_Finalize();
}

}  // extern "C"
