/* MPICH integration test: run with liboptireduce-mpich.so preloaded, OPTIREDUCE_MIN_BYTES=0 and an
 * exact mode (reliable). Every eligible float sum must equal PMPI_Allreduce's bit for bit
 * (integer-valued floats: exact in any order) and be counted as intercepted; every ineligible call
 * must be passed through unchanged. The counters come from the preloaded library itself
 * (dlsym of optireduce_get_process_stats): the program is not linked to it.
 * Prints one line per rank and exits 0, or names the failure and aborts the job. */
#include <dlfcn.h>
#include <math.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "optireduce/optireduce.h"

typedef int (*StatsFn)(optireduce_process_stats *);

static int g_rank;
static StatsFn g_stats;

static void fail(const char *what) {
  fprintf(stderr, "mpich_check: rank %d: FAIL: %s\n", g_rank, what);
  fflush(stderr);
  MPI_Abort(MPI_COMM_WORLD, 1);
}

static optireduce_process_stats stats(void) {
  optireduce_process_stats s;
  memset(&s, 0, sizeof s);
  if (g_stats(&s) != 0) fail("optireduce_get_process_stats failed");
  return s;
}

/* rank r, element i: an integer below 2^11, so sums of a few ranks are exact. */
static void fill(float *v, long n, int rank, int salt) {
  for (long i = 0; i < n; ++i) v[i] = (float)((i * 7 + rank * 13 + salt) % 2048) - 1000.0f;
}

/* One eligible float sum on comm (in place or not), checked against PMPI_Allreduce and against
 * the interception counter. */
static void check_sum(MPI_Comm comm, long n, int in_place, int use_large_count) {
  int rank = 0;
  MPI_Comm_rank(comm, &rank);
  float *in = malloc(sizeof(float) * (size_t)(n ? n : 1));
  float *out = malloc(sizeof(float) * (size_t)(n ? n : 1));
  float *ref = malloc(sizeof(float) * (size_t)(n ? n : 1));
  if (!in || !out || !ref) fail("out of memory");
  fill(in, n, rank, (int)n);
  PMPI_Allreduce(in, ref, (int)n, MPI_FLOAT, MPI_SUM, comm);
  const optireduce_process_stats before = stats();
  int rc;
  if (in_place) memcpy(out, in, sizeof(float) * (size_t)n);
  const void *send = in_place ? MPI_IN_PLACE : (const void *)in;
#if MPI_VERSION >= 4
  if (use_large_count) rc = MPI_Allreduce_c(send, out, (MPI_Count)n, MPI_FLOAT, MPI_SUM, comm);
  else
#endif
    rc = MPI_Allreduce(send, out, (int)n, MPI_FLOAT, MPI_SUM, comm);
  (void)use_large_count;
  const optireduce_process_stats after = stats();
  char what[160];
  if (rc != MPI_SUCCESS) {
    snprintf(what, sizeof what, "MPI_Allreduce of %ld floats returned %d", n, rc);
    fail(what);
  }
  if (n > 0 && memcmp(out, ref, sizeof(float) * (size_t)n) != 0) {
    snprintf(what, sizeof what, "sum of %ld floats (in_place=%d) differs from PMPI_Allreduce", n, in_place);
    fail(what);
  }
  if (after.intercepted_calls != before.intercepted_calls + 1) {
    snprintf(what, sizeof what, "sum of %ld floats (in_place=%d, large count=%d) was not intercepted", n, in_place,
             use_large_count);
    fail(what);
  }
  free(in);
  free(out);
  free(ref);
}

#ifdef MPIX_C_FLOAT16
/* rank r's element i: an fp16 number of magnitude 2^-4 .. 2^4, mixed signs. */
static _Float16 half_element(int rank, long i) {
  unsigned h = (unsigned)i * 2654435761u ^ (unsigned)(rank * 40503 + 17);
  h ^= h >> 15;
  h *= 2246822519u;
  h ^= h >> 13;
  const float magnitude = ldexpf(1.0f + (float)(h & 0xFFFF) / 65536.0f, (int)((h >> 16) % 9) - 4);
  return (_Float16)((h >> 31) ? -magnitude : magnitude);
}

static void half_sum(void *in, void *inout, int *len, MPI_Datatype *type) {
  (void)type;
  const _Float16 *a = in;
  _Float16 *b = inout;
  for (int i = 0; i < *len; ++i) b[i] = (_Float16)((float)a[i] + (float)b[i]);
}

/* One MPIX_C_FLOAT16 sum (MPI_SUM or an fp16 user op) on comm: served by the engine (MPICH 4.0.2
 * aborts when asked to reduce the type itself, so there is no PMPI reference), every element no
 * further from the float64 sum than a float32 sum in rank order rounded once. */
static void check_float16(MPI_Comm comm, long n, MPI_Op op, int in_place) {
  int rank = 0, size = 0;
  MPI_Comm_rank(comm, &rank);
  MPI_Comm_size(comm, &size);
  _Float16 *in = malloc(sizeof(_Float16) * (size_t)n), *out = malloc(sizeof(_Float16) * (size_t)n);
  if (!in || !out) fail("out of memory");
  for (long i = 0; i < n; ++i) in[i] = out[i] = half_element(rank, i);
  const optireduce_process_stats before = stats();
  if (MPI_Allreduce(in_place ? MPI_IN_PLACE : (const void *)in, out, (int)n, MPIX_C_FLOAT16, op, comm) != MPI_SUCCESS)
    fail("MPI_Allreduce of MPIX_C_FLOAT16 failed");
  const optireduce_process_stats after = stats();
  if (after.intercepted_calls != before.intercepted_calls + 1) fail("an MPIX_C_FLOAT16 sum was not intercepted");
  for (long i = 0; i < n; ++i) {
    double exact = 0;
    float running = 0;
    for (int r = 0; r < size; ++r) {
      exact += (double)half_element(r, i);
      running += (float)half_element(r, i);
    }
    if (fabs((double)out[i] - exact) > fabs((double)(_Float16)running - exact)) {
      char what[160];
      snprintf(what, sizeof what, "MPIX_C_FLOAT16 sum: element %ld is %g, the float64 sum %.9g", i, (double)out[i], exact);
      fail(what);
    }
  }
  free(in);
  free(out);
}
#endif

/* A call the library must hand to PMPI_Allreduce: counted as passthrough, result unchanged. */
static void check_passthrough(MPI_Comm comm, MPI_Datatype type, MPI_Op op, const char *label) {
  double din[5], dout[5], dref[5];
  int rank = 0;
  MPI_Comm_rank(comm, &rank);
  for (int i = 0; i < 5; ++i) din[i] = rank * 10 + i;
  const int is_double = type == MPI_DOUBLE;
  int iin[5], iout[5], iref[5];
  for (int i = 0; i < 5; ++i) iin[i] = rank * 10 + i;
  float fin[5], fout[5], fref[5];
  for (int i = 0; i < 5; ++i) fin[i] = (float)(rank * 10 + i);
  const void *in = is_double ? (void *)din : type == MPI_INT ? (void *)iin : (void *)fin;
  void *out = is_double ? (void *)dout : type == MPI_INT ? (void *)iout : (void *)fout;
  void *ref = is_double ? (void *)dref : type == MPI_INT ? (void *)iref : (void *)fref;
  const size_t bytes = is_double ? sizeof din : type == MPI_INT ? sizeof iin : sizeof fin;
  PMPI_Allreduce(in, ref, 5, type, op, comm);
  const optireduce_process_stats before = stats();
  if (MPI_Allreduce(in, out, 5, type, op, comm) != MPI_SUCCESS) fail(label);
  const optireduce_process_stats after = stats();
  char what[160];
  if (memcmp(out, ref, bytes) != 0) {
    snprintf(what, sizeof what, "%s: result differs from PMPI_Allreduce", label);
    fail(what);
  }
  if (after.intercepted_calls != before.intercepted_calls || after.passthrough_calls != before.passthrough_calls + 1) {
    snprintf(what, sizeof what, "%s: expected one passthrough call and no interception", label);
    fail(what);
  }
}

int main(int argc, char **argv) {
  int provided = 0;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
  int size = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &g_rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);

  char version[MPI_MAX_LIBRARY_VERSION_STRING];
  int length = 0;
  MPI_Get_library_version(version, &length);
  if (!strstr(version, "MPICH")) fail("not running on MPICH (MPI_Get_library_version has no \"MPICH\")");
  g_stats = (StatsFn)dlsym(RTLD_DEFAULT, "optireduce_get_process_stats");
  if (!g_stats) fail("optireduce_get_process_stats not found: liboptireduce-mpich.so is not preloaded");
  const char *min_bytes = getenv("OPTIREDUCE_MIN_BYTES");
  if (!min_bytes || strcmp(min_bytes, "0") != 0) fail("run me with OPTIREDUCE_MIN_BYTES=0");
  const char *mode = getenv("OPTIREDUCE_MODE");
  if (!mode || strcmp(mode, "reliable") != 0) fail("run me with OPTIREDUCE_MODE=reliable (exact results)");
  if (size < 2) fail("run me on at least 2 ranks");

  const optireduce_process_stats start = stats();
  const long sizes[] = {1, 7, 1000, 65537, (1L << 20) + 3};
  long calls = 0;
  for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; ++i) {
    check_sum(MPI_COMM_WORLD, sizes[i], 0, 0);
    check_sum(MPI_COMM_WORLD, sizes[i], 1, 0);
    calls += 2;
  }
#if MPI_VERSION >= 4
  check_sum(MPI_COMM_WORLD, 4099, 0, 1);
  check_sum(MPI_COMM_WORLD, 4099, 1, 1);
  calls += 2;
#endif
#ifdef MPIX_C_FLOAT16
  MPI_Op fp16_sum;
  MPI_Op_create(&half_sum, 1, &fp16_sum);
  check_float16(MPI_COMM_WORLD, 65537, MPI_SUM, 0);
  check_float16(MPI_COMM_WORLD, 1001, MPI_SUM, 1);
  check_float16(MPI_COMM_WORLD, 4099, fp16_sum, 0);
  check_float16(MPI_COMM_WORLD, 4099, fp16_sum, 1);
  MPI_Op_free(&fp16_sum);
  calls += 4;
#endif
  /* A duplicate and a split communicator: their own engines, freed with the communicator. */
  MPI_Comm dup, half;
  MPI_Comm_dup(MPI_COMM_WORLD, &dup);
  check_sum(dup, 12345, 0, 0);
  calls += 1;
  MPI_Comm_free(&dup);
  MPI_Comm_split(MPI_COMM_WORLD, g_rank % 2, g_rank, &half);
  int half_size = 0;
  MPI_Comm_size(half, &half_size);
  if (half_size >= 2) {
    check_sum(half, 3000, 1, 0);
    calls += 1;
  } else {
    check_passthrough(half, MPI_FLOAT, MPI_SUM, "float sum on a communicator of one rank");
  }
  MPI_Comm_free(&half);

  check_passthrough(MPI_COMM_WORLD, MPI_DOUBLE, MPI_SUM, "double sum");
  check_passthrough(MPI_COMM_WORLD, MPI_INT, MPI_SUM, "int sum");
  check_passthrough(MPI_COMM_WORLD, MPI_FLOAT, MPI_MAX, "float max");
  check_passthrough(MPI_COMM_SELF, MPI_FLOAT, MPI_SUM, "float sum on MPI_COMM_SELF");

  const optireduce_process_stats end = stats();
  if (end.intercepted_calls - start.intercepted_calls != (uint64_t)calls) fail("intercepted call count is off");
  if (end.engine_failures != 0) fail("an engine could not be created");
  const char *(*library_version)(void) = (const char *(*)(void))dlsym(RTLD_DEFAULT, "optireduce_version");
  printf("mpich_check: rank %d of %d: OK: %llu intercepted, %llu passed through, %llu engines (OptiReduce %s)\n",
         g_rank, size, (unsigned long long)end.intercepted_calls, (unsigned long long)end.passthrough_calls,
         (unsigned long long)end.engines_created, library_version ? library_version() : "?");
  MPI_Finalize();
  return 0;
}
