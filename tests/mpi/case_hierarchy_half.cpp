// hierarchy_half: float16 and bfloat16 sums (a 2-byte datatype and the user op that sums it, as
// jobs make them) on a communicator spread over several hosts with several ranks on some (run under
// scripts/cluster.sh --ranks-per-host; tests/cluster/mpi_hierarchy.sh with its half argument), so
// the engine takes the three-stage call in 16 bits. MPITEST_CALLS calls of fp16, then as many of
// bf16, of MPITEST_ELEMENTS (default 1M) elements. Each call ran by the engine, as a call of its
// format, and succeeded; every result bitwise identical on every rank; where no rank's call was
// bounded, bitwise the exact sum (small integers: exact in both formats, whatever the rounding),
// else within a relative RMS error of 0.3 of it, or of twice the square root of the share of
// entries the call reports dropped. The exact sum is computed here, not by MPI: the links carry
// the engine's calls alone (the script counts their bytes).
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "cases.hpp"
#include "half_ops.hpp"
#include "harness.hpp"

namespace mpitest {
namespace {

long env_long(const char* name, long fallback) {
  const char* v = std::getenv(name);
  return v && *v ? std::strtol(v, nullptr, 10) : fallback;
}

// Rank r's element i in call c: an integer in -8..8, so sums over up to 32 ranks are exact in both
// formats.
float small_integer(int rank, int call, std::int64_t i) {
  const std::uint64_t x = static_cast<std::uint64_t>(i) * 2654435761ull + static_cast<std::uint64_t>(rank + 1) * 97531ull +
                          static_cast<std::uint64_t>(call) * 7919ull;
  return static_cast<float>(static_cast<int>(x % 17) - 8);
}

// One format's calls; returns how many were bounded on some rank, and the worst error in `worst`.
int run_calls(Half f, MPI_Comm comm, MPI_Datatype type, MPI_Op op, std::int64_t count, int calls, double& worst) {
  const int n = comm_size(comm), me = comm_rank(comm);
  const int format = f == Half::float16 ? OPTIREDUCE_FORMAT_FLOAT16 : OPTIREDUCE_FORMAT_BFLOAT16;
  int bounded_calls = 0;
  std::vector<std::uint16_t> input(static_cast<std::size_t>(count)), got(input.size());
  std::vector<float> want(input.size());
  for (int c = 0; c < calls; ++c) {
    const std::string what = std::string("hierarchy ") + name(f) + " call " + std::to_string(c);
    for (std::int64_t i = 0; i < count; ++i) input[static_cast<std::size_t>(i)] = narrow(f, small_integer(me, c, i));
    const std::uint64_t before = last_call(comm).sequence;
    const int rc = MPI_Allreduce(input.data(), got.data(), static_cast<int>(count), type, op, comm);
    MPITEST_CHECK(rc == MPI_SUCCESS, "%s: MPI_Allreduce returned %d", what.c_str(), rc);
    const optireduce_call_stats call = last_call(comm);
    MPITEST_CHECK(call.sequence == before + 1 && call.ok == 1 && call.format == format,
                  "%s: engine call %llu, ok %d, format %d", what.c_str(), static_cast<unsigned long long>(call.sequence),
                  call.ok, call.format);
    expect_same_on_all_ranks(got.data(), got.size() * 2, comm, what);
    std::fill(want.begin(), want.end(), 0.0f);
    for (int r = 0; r < n; ++r)
      for (std::int64_t i = 0; i < count; ++i) want[static_cast<std::size_t>(i)] += small_integer(r, c, i);
    // Each rank knows the kind of its own slices' exchanges: bounded anywhere allows an error.
    int any_bounded = call.kind == OPTIREDUCE_CALL_BOUNDED ? 1 : 0;
    MPI_Allreduce(MPI_IN_PLACE, &any_bounded, 1, MPI_INT, MPI_MAX, comm);
    bounded_calls += any_bounded;
    double error = 0, norm = 0;
    std::int64_t wrong = 0;
    for (std::size_t i = 0; i < want.size(); ++i) {
      const double d = double(widen(f, got[i])) - double(want[i]);
      error += d * d, norm += double(want[i]) * double(want[i]);
      wrong += d != 0;
    }
    MPITEST_CHECK(any_bounded || wrong == 0, "%s: %lld of %lld elements differ from the exact sum of an exact call",
                  what.c_str(), static_cast<long long>(wrong), static_cast<long long>(count));
    const double rel = norm > 0 ? std::sqrt(error / norm) : 0;
    worst = std::max(worst, rel);
    const double allowed = std::max(0.3, 2 * std::sqrt(call.dropped_fraction));
    MPITEST_CHECK(rel <= allowed, "%s: relative RMS error %.4f beyond %.4f (%.4f of the entries dropped)", what.c_str(), rel,
                  allowed, call.dropped_fraction);
  }
  return bounded_calls;
}

}  // namespace

int case_hierarchy_half() {
  MPI_Comm comm = MPI_COMM_WORLD;
  const std::int64_t count = env_long("MPITEST_ELEMENTS", 1 << 20);
  const int calls = static_cast<int>(env_long("MPITEST_CALLS", 15));
  MPI_Datatype two_bytes = MPI_DATATYPE_NULL;
  MPI_Type_contiguous(2, MPI_BYTE, &two_bytes);
  MPI_Type_commit(&two_bytes);
  MPI_Op fp16_sum = MPI_OP_NULL, bf16_sum = MPI_OP_NULL;
  MPI_Op_create(&half_sum<Half::float16>, 1, &fp16_sum);
  MPI_Op_create(&half_sum<Half::bfloat16>, 1, &bf16_sum);
  double worst = 0;
  const int bounded = run_calls(Half::float16, comm, two_bytes, fp16_sum, count, calls, worst) +
                      run_calls(Half::bfloat16, comm, two_bytes, bf16_sum, count, calls, worst);
  MPI_Op_free(&fp16_sum);
  MPI_Op_free(&bf16_sum);
  MPI_Type_free(&two_bytes);
  if (comm_rank(comm) == 0)
    std::printf("hierarchy_half: %d fp16 and %d bf16 calls of %lld elements on %d ranks, %d bounded somewhere, worst "
                "relative RMS error %.2e\n",
                calls, calls, static_cast<long long>(count), comm_size(comm), bounded, worst);
  return 2 * calls;
}

}  // namespace mpitest
