#include "mpi_bootstrap.hpp"

#include <algorithm>
#include <cstdint>

namespace optireduce::pmpi {
namespace {

struct Context {
  MPI_Comm comm;
  MPI_Request request = MPI_REQUEST_NULL;
  bool owns_comm = false;  // a communicator split for a sub-group: freed at release
};

MPI_Comm comm_of(void* context) { return static_cast<Context*>(context)->comm; }

// MPI counts are int: large buffers go in pieces (every rank cuts them alike).
constexpr std::uint64_t kPiece = 1u << 30;

int allgather(void* context, const void* mine, std::uint64_t bytes, void* all) {
  if (bytes > kPiece) return 1;  // never: the engine's blobs are small
  const int n = static_cast<int>(bytes);
  return PMPI_Allgather(mine, n, MPI_BYTE, all, n, MPI_BYTE, comm_of(context)) == MPI_SUCCESS ? 0 : 1;
}

int start_allgather(void* context, const void* mine, std::uint64_t bytes, void* all) {
  auto* c = static_cast<Context*>(context);
  if (c->request != MPI_REQUEST_NULL) PMPI_Wait(&c->request, MPI_STATUS_IGNORE);
  if (bytes > kPiece) return 1;  // never, as above
  const int n = static_cast<int>(bytes);
  return PMPI_Iallgather(mine, n, MPI_BYTE, all, n, MPI_BYTE, c->comm, &c->request) == MPI_SUCCESS ? 0 : 1;
}

int finish_allgather(void* context) {
  auto* c = static_cast<Context*>(context);
  if (c->request == MPI_REQUEST_NULL) return 0;
  return PMPI_Wait(&c->request, MPI_STATUS_IGNORE) == MPI_SUCCESS ? 0 : 1;
}

int allreduce_sum(void* context, const float* input, float* output, std::uint64_t count) {
  for (std::uint64_t at = 0; at < count; at += kPiece) {
    const int n = static_cast<int>(std::min(kPiece, count - at));
    const void* send = input == output ? MPI_IN_PLACE : static_cast<const void*>(input + at);
    if (const int rc = PMPI_Allreduce(send, output + at, n, MPI_FLOAT, MPI_SUM, comm_of(context)); rc != MPI_SUCCESS) return rc;
  }
  return 0;
}

void release(void* context) {
  auto* c = static_cast<Context*>(context);
  // Completes an all-gather still in flight: every rank started it, so it finishes.
  if (c->request != MPI_REQUEST_NULL) PMPI_Wait(&c->request, MPI_STATUS_IGNORE);
  if (c->owns_comm) PMPI_Comm_free(&c->comm);
  delete c;
}

optireduce_bootstrap bootstrap_over(MPI_Comm comm, bool owns_comm);

int split(void* context, int color, int key, optireduce_bootstrap* out) {
  MPI_Comm group = MPI_COMM_NULL;
  if (PMPI_Comm_split(comm_of(context), color < 0 ? MPI_UNDEFINED : color, key, &group) != MPI_SUCCESS) return 1;
  *out = optireduce_bootstrap{};
  if (group != MPI_COMM_NULL) *out = bootstrap_over(group, true);
  return 0;
}

optireduce_bootstrap bootstrap_over(MPI_Comm comm, bool owns_comm) {
  optireduce_bootstrap b{};
  PMPI_Comm_rank(comm, &b.rank);
  PMPI_Comm_size(comm, &b.ranks);
  b.context = new Context{comm, MPI_REQUEST_NULL, owns_comm};
  b.allgather = &allgather;
  b.start_allgather = &start_allgather;
  b.finish_allgather = &finish_allgather;
  b.allreduce_sum = &allreduce_sum;
  b.release = &release;
  b.split = &split;
  b.own_path = "PMPI_Allreduce";
  return b;
}

}  // namespace

optireduce_bootstrap mpi_bootstrap(MPI_Comm comm) { return bootstrap_over(comm, false); }

}  // namespace optireduce::pmpi
