/* OptiReduce-MPI public C API.
 *
 * The library is normally preloaded (LD_PRELOAD) into an unmodified MPI job and needs no calls at
 * all. A program that wants to know what happened to its reductions can look these symbols up
 * (dlsym, ctypes) or link against liboptireduce.so directly. */
#ifndef OPTIREDUCE_OPTIREDUCE_H
#define OPTIREDUCE_OPTIREDUCE_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define OPTIREDUCE_VERSION_MAJOR 0
#define OPTIREDUCE_VERSION_MINOR 1
#define OPTIREDUCE_VERSION_PATCH 0

/* "MAJOR.MINOR.PATCH" of the library actually loaded (which may differ from this header). */
const char *optireduce_version(void);

/* Counters of this process since MPI_Init. They outlive communicators: a communicator freed
 * before MPI_Finalize still counts. */
typedef struct optireduce_process_stats {
  uint64_t intercepted_calls;  /* eligible MPI_Allreduce calls run by the engine */
  uint64_t passthrough_calls;  /* MPI_Allreduce calls handed to PMPI_Allreduce unchanged */
  uint64_t bytes_reduced;      /* payload bytes of intercepted calls */
  uint64_t entries_reduced;    /* result entries of intercepted calls */
  uint64_t entries_dropped;    /* result entries that lacked a contribution (0 when exact) */
  double dropped_fraction;     /* entries_dropped / entries_reduced, 0 when nothing reduced */
  uint64_t engines_created;    /* communicators that got an engine */
  uint64_t engine_failures;    /* communicators where engine creation failed (they fall back) */
} optireduce_process_stats;

/* Fills *out. Returns 0, or -1 when out is NULL. Safe to call from any thread at any time. */
int optireduce_get_process_stats(optireduce_process_stats *out);

#ifdef __cplusplus
}
#endif

#endif /* OPTIREDUCE_OPTIREDUCE_H */
