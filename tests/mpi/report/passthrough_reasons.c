/* The job of the issue that found MPI_Iallreduce uncounted: 3 float MPI_Allreduce, 1 float
 * MPI_Iallreduce and 1 double MPI_Allreduce per rank. With OPTIREDUCE_MIN_BYTES=0 the report must
 * say intercepted 3, passthrough 2 (nonblocking 1, datatype 1); check_report.py reads it. Every
 * sum is checked here. Plain MPI: the library is preloaded, never linked. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

enum { kCount = 4099 };

static void check(const char* what, const float* got, int ranks) {
  for (int i = 0; i < kCount; ++i)
    if (got[i] != (float)(ranks * (i % 97))) {
      fprintf(stderr, "passthrough_reasons: FAIL: %s: element %d is %g, expected %d\n", what, i, got[i], ranks * (i % 97));
      MPI_Abort(MPI_COMM_WORLD, 1);
    }
}

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank = 0, ranks = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &ranks);
  float* send = malloc(kCount * sizeof(float));
  float* recv = malloc(kCount * sizeof(float));
  for (int i = 0; i < kCount; ++i) send[i] = (float)(i % 97);

  for (int call = 0; call < 3; ++call) {
    MPI_Allreduce(send, recv, kCount, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    check("MPI_Allreduce", recv, ranks);
  }
  MPI_Request request;
  MPI_Iallreduce(send, recv, kCount, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD, &request);
  MPI_Wait(&request, MPI_STATUS_IGNORE);
  check("MPI_Iallreduce", recv, ranks);
  double one = 1.0, sum = 0.0;
  MPI_Allreduce(&one, &sum, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
  if (sum != ranks) {
    fprintf(stderr, "passthrough_reasons: FAIL: the double sum is %g, expected %d\n", sum, ranks);
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  if (rank == 0) printf("passthrough_reasons: PASS on %d ranks\n", ranks);
  free(send);
  free(recv);
  MPI_Finalize();
  return 0;
}
