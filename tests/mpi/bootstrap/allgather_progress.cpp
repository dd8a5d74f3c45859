// The engine's bootstrap over MPI (pmpi/mpi_bootstrap.cpp) on its own, without the library: an
// all-gather begun by start_allgather completes under progress_allgather alone, which the
// interposer calls after each engine call, so that the call finishing it (the loss agreement's,
// deadlines/agreements.hpp) does not run its rounds. Prints one line and exits 0 on every rank
// when it holds, 1 otherwise.
#include <mpi.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <thread>
#include <vector>

#include "mpi_bootstrap.hpp"

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank = 0, size = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  optireduce_bootstrap b = optireduce::pmpi::mpi_bootstrap(MPI_COMM_WORLD);
  int good = 1;
  // Nothing pending: nothing to do.
  good &= optireduce::pmpi::progress_allgather(b.context) ? 1 : 0;
  for (int round = 0; round < 3; ++round) {
    const std::uint64_t mine = 1000u * static_cast<std::uint64_t>(round + 1) + static_cast<std::uint64_t>(rank);
    std::vector<std::uint64_t> all(static_cast<std::size_t>(size), 0);
    good &= b.start_allgather(b.context, &mine, sizeof mine, all.data()) == 0 ? 1 : 0;
    // Bounded: a job whose all-gather never completes this way fails here instead of hanging.
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(30);
    bool done = false;
    while (!done && std::chrono::steady_clock::now() < until) {
      done = optireduce::pmpi::progress_allgather(b.context);
      if (!done) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    if (!done) std::fprintf(stderr, "rank %d: round %d: the all-gather did not complete under progress alone\n", rank, round);
    good &= done ? 1 : 0;
    for (int p = 0; p < size; ++p)
      if (done && all[static_cast<std::size_t>(p)] != 1000u * static_cast<std::uint64_t>(round + 1) + static_cast<std::uint64_t>(p)) {
        std::fprintf(stderr, "rank %d: round %d: entry %d is %llu\n", rank, round, p,
                     static_cast<unsigned long long>(all[static_cast<std::size_t>(p)]));
        good = 0;
      }
    // The finish then has nothing left to wait for.
    good &= b.finish_allgather(b.context) == 0 ? 1 : 0;
  }
  b.release(b.context);
  int everywhere = 0;
  MPI_Allreduce(&good, &everywhere, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
  if (rank == 0) std::printf("allgather_progress: %s on %d ranks\n", everywhere ? "ok" : "FAILED", size);
  MPI_Finalize();
  return everywhere ? 0 : 1;
}
