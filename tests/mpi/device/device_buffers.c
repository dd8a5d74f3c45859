/* Device buffers pass through: with the stand-in driver (cuda_standin.c) claiming a buffer is
 * device memory on some rank, the call goes to PMPI_Allreduce on every rank, counted; host
 * buffers still run through the engine. MPITEST_DRIVER says how the driver comes:
 *   preloaded  LD_PRELOAD holds it (found by dlsym(RTLD_DEFAULT))
 *   late       this program opens it RTLD_LOCAL after MPI_Init, as the CUDA runtime does
 *              (found by dlopen("libcuda.so.1", RTLD_NOLOAD)); MPITEST_STANDIN names the file
 *   absent     no driver: every call runs through the engine
 * Run with OPTIREDUCE_MIN_BYTES=0 and the library preloaded. */
#include <dlfcn.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "optireduce/optireduce.h"

enum { kCount = 8192 };

typedef void (*ClaimFn)(const void*, size_t);
typedef void (*ReleaseFn)(void);
typedef unsigned long (*QueriesFn)(void);
typedef int (*StatsFn)(optireduce_process_stats*);

static int g_rank, g_ranks;
static ClaimFn g_claim;
static ReleaseFn g_release;

static void fail(const char* what) {
  fprintf(stderr, "device_buffers [rank %d]: FAIL: %s\n", g_rank, what);
  MPI_Abort(MPI_COMM_WORLD, 1);
}

static optireduce_process_stats stats(void) {
  optireduce_process_stats s;
  StatsFn get = (StatsFn)dlsym(RTLD_DEFAULT, "optireduce_get_process_stats");
  if (!get || get(&s) != 0) fail("the library is not preloaded");
  return s;
}

/* One sum of kCount floats; `device` says which ranks claim their receive buffer (bit r: rank
 * r). Checks the result and whether the engine or the MPI ran it. */
static void call(const char* what, unsigned device, int in_place, int expect_engine) {
  static float send[kCount], recv[kCount];
  for (int i = 0; i < kCount; ++i) send[i] = recv[i] = (float)(i % 89 + g_rank);
  if (g_claim && (device >> g_rank & 1)) g_claim(recv, sizeof recv);
  const optireduce_process_stats before = stats();
  MPI_Allreduce(in_place ? MPI_IN_PLACE : send, recv, kCount, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
  const optireduce_process_stats after = stats();
  if (g_release) g_release();
  for (int i = 0; i < kCount; ++i)
    if (recv[i] != (float)(g_ranks * (i % 89) + g_ranks * (g_ranks - 1) / 2)) fail(what);
  const int engine = after.intercepted_calls == before.intercepted_calls + 1;
  const int mpi = after.passthrough_calls == before.passthrough_calls + 1;
  if (engine != expect_engine || mpi == expect_engine) {
    fprintf(stderr, "device_buffers [rank %d]: FAIL: %s went to the %s\n", g_rank, what, engine ? "engine" : "MPI");
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
}

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &g_rank);
  MPI_Comm_size(MPI_COMM_WORLD, &g_ranks);
  const char* how = getenv("MPITEST_DRIVER");
  void* driver = RTLD_DEFAULT; /* a null handle */
  if (how && !strcmp(how, "late") && !(driver = dlopen(getenv("MPITEST_STANDIN"), RTLD_NOW | RTLD_LOCAL)))
    fail("cannot open MPITEST_STANDIN");
  g_claim = (ClaimFn)dlsym(driver, "standin_cuda_claim");
  g_release = (ReleaseFn)dlsym(driver, "standin_cuda_release_all");
  const int present = how && strcmp(how, "absent");
  if (present != (g_claim != NULL)) fail(present ? "the stand-in driver is not loaded" : "a driver is loaded");

  call("host buffers", 0, 0, 1);
  call("device buffers on every rank", ~0u, 0, !present);
  call("a device buffer on rank 1 only", 2u, 0, !present);
  call("a device buffer on rank 0 only, in place", 1u, 1, !present);
  call("host buffers again", 0, 1, 1);
  if (present) {
    QueriesFn queries = (QueriesFn)dlsym(driver, "standin_cuda_queries");
    if (!queries || queries() == 0) fail("the library never asked the driver");
  }
  if (g_rank == 0) printf("device_buffers (%s driver): PASS on %d ranks\n", how ? how : "?", g_ranks);
  MPI_Finalize();
  return 0;
}
