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

/* What a call computed: its collective ... */
enum optireduce_collective {
  OPTIREDUCE_COLLECTIVE_ALLREDUCE = 0,     /* MPI_Allreduce, a torch all_reduce */
  OPTIREDUCE_COLLECTIVE_REDUCE_SCATTER = 1 /* MPI_Reduce_scatter(_block), a torch reduce_scatter */
};
#define OPTIREDUCE_COLLECTIVES 2

/* ... and the format of its elements. */
enum optireduce_format {
  OPTIREDUCE_FORMAT_FLOAT32 = 0,
  OPTIREDUCE_FORMAT_FLOAT16 = 1, /* IEEE binary16 */
  OPTIREDUCE_FORMAT_BFLOAT16 = 2
};
#define OPTIREDUCE_FORMATS 3

/* Counters of this process since MPI_Init. They outlive communicators: a communicator freed
 * before MPI_Finalize still counts. */
typedef struct optireduce_process_stats {
  uint64_t intercepted_calls;  /* calls the engine served: allreduce of any format, reduce-scatter */
  uint64_t passthrough_calls;  /* calls handed to the MPI's own collective unchanged (by reason in the report) */
  uint64_t bytes_reduced;      /* payload bytes of intercepted calls */
  uint64_t entries_reduced;    /* result entries of intercepted calls */
  uint64_t entries_dropped;    /* result entries that lacked a contribution (0 when exact) */
  double dropped_fraction;     /* entries_dropped / entries_reduced, 0 when nothing reduced */
  uint64_t engines_created;    /* communicators that got an engine */
  uint64_t engine_failures;    /* communicators where engine creation failed (they fall back) */
  uint64_t bounded_calls;      /* intercepted calls that ran under deadlines */
  uint64_t fallback_calls;     /* intercepted calls that ran exactly because of the loss budget */
  /* intercepted_calls by [enum optireduce_collective][enum optireduce_format] */
  uint64_t intercepted_by_operation[OPTIREDUCE_COLLECTIVES][OPTIREDUCE_FORMATS];
} optireduce_process_stats;

/* Fills *out. Returns 0, or -1 when out is NULL. Safe to call from any thread at any time. */
int optireduce_get_process_stats(optireduce_process_stats *out);

/* What happened in the last engine call on a communicator. */
enum optireduce_call_kind {
  OPTIREDUCE_CALL_EXACT = 0,       /* exact by configuration (reliable mode) */
  OPTIREDUCE_CALL_CALIBRATION = 1, /* exact while the deadlines calibrate */
  OPTIREDUCE_CALL_BOUNDED = 2,     /* under deadlines */
  OPTIREDUCE_CALL_FALLBACK = 3,    /* exact because recent calls lost more than the budget */
  OPTIREDUCE_CALL_MPI = 4          /* exact over the MPI's own allreduce: measured faster on this
                                      host's shared memory (OPTIREDUCE_STEP_ASIDE) */
};

typedef struct optireduce_call_stats {
  uint64_t sequence;          /* call number on the communicator, from 1; 0: no call yet */
  uint64_t entries;
  uint64_t dropped_entries;   /* lacked a contribution or arrived nowhere */
  uint64_t filled_entries;    /* of those, all-gather entries this rank filled in */
  double dropped_fraction;
  double latency_us;
  double deadline_us[2];      /* scatter-reduce, all-gather budgets (0 for exact calls) */
  double phase_us[2];         /* what each phase took */
  int kind;                   /* enum optireduce_call_kind */
  int ok;                     /* 1 when the call succeeded */
  uint64_t divergent_calls;   /* so far on this communicator, agreed by all ranks */
  uint64_t fallbacks;         /* times the loss budget sent it to exact calls */
  int collective;             /* enum optireduce_collective of the call */
  int format;                 /* enum optireduce_format of its elements */
} optireduce_call_stats;

/* By Fortran handle (MPI_Comm_c2f; mpi4py: comm.py2f()), so it works without mpi.h, e.g. from
 * ctypes. Return 0, or -1 when out is NULL or the library is not initialised. */
int optireduce_comm_last_call_f(int fortran_comm, optireduce_call_stats *out);
/* Collective over the communicator, like MPI_Comm_set_info(comm, {"optireduce_mode": mode}):
 * "bounded", "reliable" or "off". Returns MPI_SUCCESS (0) or an MPI error class. */
int optireduce_comm_set_mode_f(int fortran_comm, const char *mode);

#ifdef MPI_VERSION /* include mpi.h first to get the MPI_Comm forms */
int optireduce_comm_last_call(MPI_Comm comm, optireduce_call_stats *out);
int optireduce_comm_set_mode(MPI_Comm comm, const char *mode);
#endif

#ifdef __cplusplus
}
#endif

#endif /* OPTIREDUCE_OPTIREDUCE_H */
