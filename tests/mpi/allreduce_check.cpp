// MPI integration test of the preloaded library: `allreduce_check <case>` under mpirun with
// LD_PRELOAD=liboptireduce.so. Exits 0 when every check passed; any failure aborts the job.
#include <mpi.h>

#include <cstdio>
#include <cstring>

#include "cases.hpp"
#include "harness.hpp"

namespace {

struct Case {
  const char* name;
  int (*run)();
  bool needs_threads;
};

constexpr Case kCases[] = {
    {"exact", mpitest::case_exact, false},           {"large", mpitest::case_large, false},
    {"threshold", mpitest::case_threshold, false},   {"random", mpitest::case_random, false},
    {"ineligible", mpitest::case_ineligible, false}, {"threads", mpitest::case_threads, true},
    {"smoke", mpitest::case_smoke, false},           {"buckets", mpitest::case_buckets, false},
    {"mode_disagreement", mpitest::case_mode_disagreement, false}, {"first_use_race", mpitest::case_first_use_race, true},
    {"late_rank", mpitest::case_late_rank, false},   {"half", mpitest::case_half, false},
    {"bounded_loss", mpitest::case_bounded_loss, false},     {"bounded_delay", mpitest::case_bounded_delay, false},
    {"bounded_modes", mpitest::case_bounded_modes, false},   {"bounded_trace", mpitest::case_bounded_trace, false},
    {"bounded_memory", mpitest::case_bounded_memory, false}, {"bounded_clean", mpitest::case_bounded_clean, false},
    {"reduce_scatter", mpitest::case_reduce_scatter, false}, {"hierarchy", mpitest::case_hierarchy, false},
    {"hierarchy_half", mpitest::case_hierarchy_half, false},
    {"reduce_scatter_bounded", mpitest::case_reduce_scatter_bounded, false}, {"outage", mpitest::case_outage, false},
    {"hierarchy_reduce_scatter", mpitest::case_hierarchy_reduce_scatter, false},
};

}  // namespace

int main(int argc, char** argv) {
  const Case* chosen = nullptr;
  for (const Case& c : kCases)
    if (argc == 2 && std::strcmp(argv[1], c.name) == 0) chosen = &c;
  if (!chosen) {
    std::fprintf(stderr, "usage: %s <case>; cases:", argv[0]);
    for (const Case& c : kCases) std::fprintf(stderr, " %s", c.name);
    std::fprintf(stderr, "\n");
    return 2;
  }

  // Both entry points are wrapped by the library; the threaded case needs MPI_Init_thread.
  if (chosen->needs_threads) {
    int provided = MPI_THREAD_SINGLE;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
    MPITEST_CHECK(provided == MPI_THREAD_MULTIPLE, "MPI_THREAD_MULTIPLE not provided (got %d)", provided);
  } else {
    MPI_Init(&argc, &argv);
  }
  // Fails early, with the "not preloaded" message, rather than deep inside a case.
  mpitest::process_stats();

  const int checked = chosen->run();
  MPI_Barrier(MPI_COMM_WORLD);
  if (mpitest::world_rank() == 0)
    std::printf("allreduce_check %s: PASS, %d calls checked on %d ranks\n", chosen->name, checked,
                mpitest::comm_size(MPI_COMM_WORLD));
  MPI_Finalize();
  return 0;
}
