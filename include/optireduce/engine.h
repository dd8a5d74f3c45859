/* The engine's C entry point: bounded (or exact) reductions over the ranks of a group.
 *
 * The engine knows nothing of how a job was launched. A front end gives it a bootstrap: a few
 * collectives over the group's ranks that the job already has (the preload library makes them
 * with PMPI_Allgather and PMPI_Allreduce; the torch backend with a gloo group over
 * torch.distributed's store). liboptireduce-engine.so exports this API and links no MPI; the
 * preload library (liboptireduce.so) reaches the engine through the same functions.
 *
 *   optireduce_init(world)                  settings parsed, checked, agreed by every rank
 *   e = optireduce_engine_open(group)       one per group; its engine is made inside its first call
 *   optireduce_engine_allreduce(e, ...)     OK, DECLINED (reduce it yourself), UNSUPPORTED, FAILED
 *   optireduce_engine_close(e)
 *   optireduce_finalize(world)              report and finalize line
 *
 * Every function is safe to call from any thread; calls on one handle run one at a time. */
#ifndef OPTIREDUCE_ENGINE_H
#define OPTIREDUCE_ENGINE_H

#include <stddef.h>
#include <stdint.h>

#include "optireduce/optireduce.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Element formats of a call: enum optireduce_format (optireduce.h). */

/* Reduction operations. */
enum optireduce_op { OPTIREDUCE_OP_SUM = 0 };

/* What a call returned. */
enum optireduce_result {
  OPTIREDUCE_OK = 0,          /* done: the output holds the result */
  OPTIREDUCE_DECLINED = 1,    /* not run, on every rank alike (*reason says why): reduce it your own way
                                 and tell optireduce_record_passthrough */
  OPTIREDUCE_UNSUPPORTED = 2, /* this engine does not run this format, operation or shape: nothing ran
                                 on any rank (the arguments decide it, and they match on every rank) */
  OPTIREDUCE_FAILED = 3,      /* the call failed on every rank (the failure is agreed); the output is
                                 undefined; optireduce_engine_error says why; the group's later calls
                                 are declined (ENGINE_FAILED) */
  OPTIREDUCE_INVALID = 4      /* bad arguments or no optireduce_init: nothing was done */
};

/* Why a reduction did not go through the engine (the report's passthrough_by_reason). */
enum optireduce_pass_reason {
  OPTIREDUCE_PASS_DATATYPE = 0,   /* an element type the engine does not reduce */
  OPTIREDUCE_PASS_OP = 1,         /* an operation other than a sum */
  OPTIREDUCE_PASS_COMMUNICATOR = 2, /* an intercommunicator, or fewer than 2 ranks */
  OPTIREDUCE_PASS_ARGUMENTS = 3,  /* arguments the front end's own path rejects */
  OPTIREDUCE_PASS_SIZE = 4,       /* below OPTIREDUCE_MIN_BYTES */
  OPTIREDUCE_PASS_MODE_OFF = 5,   /* OPTIREDUCE_MODE=off or the group's mode */
  OPTIREDUCE_PASS_NO_ENGINE = 6,  /* the group's engine could not be created (on some rank) */
  OPTIREDUCE_PASS_ENGINE_FAILED = 7, /* an earlier call of the group failed */
  OPTIREDUCE_PASS_NONBLOCKING = 8,   /* a non-blocking MPI call, never run by the engine */
  OPTIREDUCE_PASS_DEVICE_BUFFER = 9, /* a device buffer on some rank */
  /* 2-byte elements with an op made by MPI_Op_create (pmpi/sum_format.hpp): */
  OPTIREDUCE_PASS_USER_OP_NOT_SUM = 10,      /* its function is not an fp16 or bf16 sum, the probe could not
                                                tell, or it was declared not commutative */
  OPTIREDUCE_PASS_USER_OP_UNKNOWN = 11,      /* its MPI_Op_create was not seen by the library */
  OPTIREDUCE_PASS_USER_OP_DISAGREEMENT = 12  /* the ranks' probes of it did not agree */
};

/* Collectives over the ranks of a group, made by the front end. Each returns 0 on success and
 * anything else on failure (the engine then fails the call it was in, or its creation). They are
 * called only from inside optireduce_* calls, on the caller's thread. */
typedef struct optireduce_bootstrap {
  int rank;  /* this process's rank in the group, 0 <= rank < ranks */
  int ranks; /* the group's size */
  void *context;
  /* Every rank gives `bytes` bytes (the same count on every rank); `all` receives ranks * bytes,
   * in rank order. */
  int (*allgather)(void *context, const void *mine, uint64_t bytes, void *all);
  /* Optional (both or neither): the same in two halves, so a late rank does not hold the others.
   * `all` stays valid until finish_allgather returns; one at a time. */
  int (*start_allgather)(void *context, const void *mine, uint64_t bytes, void *all);
  int (*finish_allgather)(void *context);
  /* output = sum over ranks of input, exactly, the same bits on every rank (input may equal
   * output). */
  int (*allreduce_sum)(void *context, const float *input, float *output, uint64_t count);
  /* Optional: called once when the engine no longer needs the context. */
  void (*release)(void *context);
  /* Optional: what the front end reduces declined calls with, for messages ("PMPI_Allreduce"). */
  const char *own_path;
  /* Optional: a collective over the group that gives the ranks passing the same color >= 0 a group
   * of their own, ordered by key, in `out` (out->ranks 0 for color < 0; its release frees it).
   * Without it a group's calls stay flat (OPTIREDUCE_HIERARCHY, README). */
  int (*split)(void *context, int color, int key, struct optireduce_bootstrap *out);
} optireduce_bootstrap;

/* --- The process -------------------------------------------------------------------------------
 * Collective over `world` (every rank of the job; not retained). Parses every OPTIREDUCE_*
 * variable, opens the trace, checks that the report can be written, and makes the ranks agree:
 * every rank's settings valid and the same as rank 0's. `flags` is OR-ed over the ranks into
 * *all_flags (may be NULL): a front end's own agreement (the preload library: a CUDA driver is
 * loaded somewhere). Returns OPTIREDUCE_OK, or OPTIREDUCE_INVALID on every rank with one line in
 * `error` on the rank it is about ("" on the others, so the line is printed once): a setting that
 * is not valid, an output that cannot be written, settings unlike rank 0's. Calling it again
 * after optireduce_finalize starts anew. */
int optireduce_init(const optireduce_bootstrap *world, uint32_t flags, uint32_t *all_flags, char *error,
                    size_t error_bytes);
/* Collective over `world`: waits for every rank, destroys the engines of handles still open (their
 * later calls are declined), writes OPTIREDUCE_REPORT (rank 0) and prints the finalize line (rank
 * 0), closes the trace. Returns OPTIREDUCE_OK, or OPTIREDUCE_INVALID when not initialised. */
int optireduce_finalize(const optireduce_bootstrap *world);
/* Counts a reduction the front end ran itself (after DECLINED, or one it never offered). */
void optireduce_record_passthrough(int reason, double elapsed_us);
/* The same for a call of another collective (enum optireduce_collective; the report counts the
 * passthrough calls of each). */
void optireduce_record_passthrough_of(int collective, int reason, double elapsed_us);

/* --- A group's engine ------------------------------------------------------------------------- */
typedef struct optireduce_engine optireduce_engine;

/* Not collective: the engine is created inside the group's first call that runs it (every rank is
 * in that call). The bootstrap is copied; its context is kept until optireduce_engine_close.
 * NULL before optireduce_init or when the bootstrap lacks allgather or allreduce_sum. */
optireduce_engine *optireduce_engine_open(const optireduce_bootstrap *group);
/* Destroys the engine and the handle; makes no call of the bootstrap (a front end that can
 * should first make sure no rank still runs a call of the group: a barrier). */
void optireduce_engine_close(optireduce_engine *engine);
/* The group's mode from its next call on: "bounded", "reliable" or "off" (the front end agrees
 * it across the ranks). Returns OPTIREDUCE_OK or OPTIREDUCE_INVALID. */
int optireduce_engine_set_mode(optireduce_engine *engine, const char *mode);

/* Collective over the group: output = sum over ranks of input (count elements of `format`;
 * input may equal output). 16-bit elements are summed in float32 in a fixed order and rounded
 * once, so every rank gets the same bits. Bounded or exact as the group's mode and calibration
 * say. On
 * OPTIREDUCE_DECLINED, *reason (may be NULL) says why. */
int optireduce_engine_allreduce(optireduce_engine *engine, const void *input, void *output, uint64_t count,
                                int format, int op, int *reason);
/* Not collective, no communication: what optireduce_engine_allreduce would return for these
 * arguments now, short of running (OK: it would run the call; DECLINED with *reason; UNSUPPORTED;
 * INVALID), so a front end can make checks of its own first (the preload library agrees on
 * device buffers). */
int optireduce_engine_accepts(optireduce_engine *engine, uint64_t count, int format, int op, int *reason);
/* Collective over the group: rank r's output (counts[r] elements) is block r of the sum over the
 * ranks of input (the sum of counts elements, blocks in rank order; counts holds one entry per
 * rank, zeros allowed). Bounded like an allreduce: what is still missing at the deadline is left
 * out of the sum, never rescaled, and counted. Returns as optireduce_engine_allreduce does. */
int optireduce_engine_reduce_scatter(optireduce_engine *engine, const void *input, void *output,
                                     const uint64_t *counts, int format, int op, int *reason);
/* The group's last call through the engine (sequence 0: none yet). Returns 0, -1 on NULL. */
int optireduce_engine_last_call(optireduce_engine *engine, optireduce_call_stats *out);
/* Why the group's last call failed, or why its engine could not be created ("" when neither);
 * copies at most `bytes` - 1 characters. Returns the full length. */
size_t optireduce_engine_error(optireduce_engine *engine, char *text, size_t bytes);

#ifdef __cplusplus
}
#endif

#endif /* OPTIREDUCE_ENGINE_H */
