// hierarchy: calls of one size on a communicator spread over several hosts with several ranks on
// some (run under scripts/cluster.sh --ranks-per-host; tests/cluster/mpi_hierarchy.sh), so the
// engine takes the three-stage call. Every call ran by the engine and succeeded; every result
// bitwise identical on every rank; where no rank's call was bounded, bitwise the exact sum,
// else within a relative RMS error of 0.3 of it, or of twice the square root of the share of
// entries the call reports dropped (a call that lost much, and says so, may err that much: with
// every dropped entry zeroed the error would be about that root). The exact sum is computed here from every rank's
// pattern, not by MPI: the links carry the engine's calls alone (the script counts their bytes).
// MPITEST_FLOATS (default 1M) floats per call, MPITEST_CALLS (default 30) calls.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "cases.hpp"
#include "harness.hpp"

namespace mpitest {
namespace {

long env_long(const char* name, long fallback) {
  const char* v = std::getenv(name);
  return v && *v ? std::strtol(v, nullptr, 10) : fallback;
}

}  // namespace

int case_hierarchy() {
  MPI_Comm comm = MPI_COMM_WORLD;
  const int n = comm_size(comm), me = comm_rank(comm);
  const std::int64_t count = env_long("MPITEST_FLOATS", 1 << 20);
  const int calls = static_cast<int>(env_long("MPITEST_CALLS", 30));
  int bounded_calls = 0;
  double worst = 0;
  std::vector<float> got(static_cast<std::size_t>(count)), want(static_cast<std::size_t>(count));
  for (int c = 0; c < calls; ++c) {
    const auto input = integer_pattern(count, me, c);
    const std::uint64_t before = last_call(comm).sequence;
    const int rc = MPI_Allreduce(input.data(), got.data(), static_cast<int>(count), MPI_FLOAT, MPI_SUM, comm);
    MPITEST_CHECK(rc == MPI_SUCCESS, "hierarchy (call %d): MPI_Allreduce returned %d", c, rc);
    const optireduce_call_stats call = last_call(comm);
    MPITEST_CHECK(call.sequence == before + 1 && call.ok == 1, "hierarchy (call %d): engine call %llu, ok %d", c,
                  static_cast<unsigned long long>(call.sequence), call.ok);
    expect_same_on_all_ranks(got.data(), got.size() * sizeof(float), comm, "hierarchy call " + std::to_string(c));
    std::fill(want.begin(), want.end(), 0.0f);
    for (int r = 0; r < n; ++r) {
      const auto theirs = integer_pattern(count, r, c);
      for (std::size_t i = 0; i < want.size(); ++i) want[i] += theirs[i];
    }
    // Each rank knows the kind of its own slices' exchanges: bounded anywhere allows an error.
    int any_bounded = call.kind == OPTIREDUCE_CALL_BOUNDED ? 1 : 0;
    MPI_Allreduce(MPI_IN_PLACE, &any_bounded, 1, MPI_INT, MPI_MAX, comm);
    bounded_calls += any_bounded;
    if (!any_bounded) {
      expect_bitwise_equal(got, want, "hierarchy call " + std::to_string(c));
      continue;
    }
    double error = 0, norm = 0;
    for (std::size_t i = 0; i < want.size(); ++i) {
      const double d = double(got[i]) - double(want[i]);
      error += d * d, norm += double(want[i]) * double(want[i]);
    }
    const double rel = norm > 0 ? std::sqrt(error / norm) : 0;
    worst = std::max(worst, rel);
    const double allowed = std::max(0.3, 2 * std::sqrt(call.dropped_fraction));
    MPITEST_CHECK(rel <= allowed, "hierarchy (call %d): relative RMS error %.4f beyond %.4f (%.4f of the entries dropped)", c,
                  rel, allowed, call.dropped_fraction);
  }
  if (me == 0)
    std::printf("hierarchy: %d calls of %lld floats on %d ranks, %d bounded somewhere, worst relative RMS error %.2e\n", calls,
                static_cast<long long>(count), n, bounded_calls, worst);
  return calls;
}

}  // namespace mpitest
