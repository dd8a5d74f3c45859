// One rank enters a call late: by MPITEST_LATE_MS milliseconds before call MPITEST_LATE_CALL of
// MPITEST_CALLS on a duplicate of world (rank MPITEST_LATE_RANK, default 1). With
// MPITEST_ERRORS=return the communicator returns errors instead of aborting. What must happen:
//  - reliable mode within the watchdog: every call exact, on every rank;
//  - bounded mode: every call succeeds, and every entry that is wrong was counted as dropped;
//    with MPITEST_MAX_DROPPED=F no call drops more than that fraction of its entries (the late
//    rank's data is late, not lost: a call that would lose more than the budget waits for it);
//  - beyond the watchdog: every rank gets an error for the same call (MPI_ERRORS_ARE_FATAL ends
//    the job), and with MPI_ERRORS_RETURN every later call is exact and passes to PMPI on every
//    rank alike.
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <thread>
#include <vector>

#include "cases.hpp"
#include "harness.hpp"

namespace mpitest {
namespace {

int env_int(const char* name, int fallback) {
  const char* v = std::getenv(name);
  return v && *v ? std::atoi(v) : fallback;
}

std::uint64_t count_wrong(const std::vector<float>& got, const std::vector<float>& want) {
  std::uint64_t wrong = 0;
  for (std::size_t i = 0; i < got.size(); ++i) wrong += std::memcmp(&got[i], &want[i], sizeof(float)) != 0;
  return wrong;
}

}  // namespace

int case_late_rank() {
  const int late_ms = env_int("MPITEST_LATE_MS", 0), late_call = env_int("MPITEST_LATE_CALL", 5);
  const int calls = env_int("MPITEST_CALLS", 10), late_rank = env_int("MPITEST_LATE_RANK", 1);
  const double max_dropped = std::getenv("MPITEST_MAX_DROPPED") ? std::atof(std::getenv("MPITEST_MAX_DROPPED")) : 1.0;
  const bool errors_return = std::getenv("MPITEST_ERRORS") && std::strcmp(std::getenv("MPITEST_ERRORS"), "return") == 0;
  MPI_Comm comm = MPI_COMM_NULL;
  MPI_Comm_dup(MPI_COMM_WORLD, &comm);
  if (errors_return) MPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN);
  const int me = comm_rank(comm);
  const std::int64_t count = 1 << 20;
  int failed_at = -1;
  for (int call = 0; call < calls; ++call) {
    const auto input = integer_pattern(count, me, call);
    std::vector<float> want(input.size()), got(input.size());
    PMPI_Allreduce(input.data(), want.data(), static_cast<int>(count), MPI_FLOAT, MPI_SUM, comm);
    if (call == late_call && me == late_rank) std::this_thread::sleep_for(std::chrono::milliseconds(late_ms));
    const std::uint64_t before = last_call(comm).sequence;
    const int rc = MPI_Allreduce(input.data(), got.data(), static_cast<int>(count), MPI_FLOAT, MPI_SUM, comm);
    const optireduce_call_stats stats = last_call(comm);
    if (rc != MPI_SUCCESS) {
      MPITEST_CHECK(errors_return, "call %d returned %d under MPI_ERRORS_ARE_FATAL", call, rc);
      MPITEST_CHECK(failed_at < 0, "call %d failed after call %d had failed: later calls must pass through", call, failed_at);
      failed_at = call;
      continue;
    }
    if (failed_at >= 0) {
      MPITEST_CHECK(stats.sequence == before, "call %d ran in the engine after the engine failed", call);
      expect_bitwise_equal(got, want, "a call after the failure");
      continue;
    }
    MPITEST_CHECK(stats.sequence == before + 1, "call %d did not run in the engine", call);
    const std::uint64_t wrong = count_wrong(got, want);
    if (stats.kind != OPTIREDUCE_CALL_BOUNDED) MPITEST_CHECK(wrong == 0, "exact call %d: %llu entries wrong", call,
                                                             static_cast<unsigned long long>(wrong));
    MPITEST_CHECK(wrong <= stats.dropped_entries, "call %d: %llu entries wrong, %llu counted as dropped", call,
                  static_cast<unsigned long long>(wrong), static_cast<unsigned long long>(stats.dropped_entries));
    MPITEST_CHECK(double(stats.dropped_entries) <= max_dropped * double(count),
                  "call %d (%s): %llu of %lld entries dropped, more than MPITEST_MAX_DROPPED=%g", call,
                  stats.kind == OPTIREDUCE_CALL_BOUNDED ? "bounded" : "exact",
                  static_cast<unsigned long long>(stats.dropped_entries), static_cast<long long>(count), max_dropped);
  }
  // Every rank failed the same call, or none did.
  int lowest = failed_at, highest = failed_at;
  PMPI_Allreduce(&failed_at, &lowest, 1, MPI_INT, MPI_MIN, comm);
  PMPI_Allreduce(&failed_at, &highest, 1, MPI_INT, MPI_MAX, comm);
  MPITEST_CHECK(lowest == highest, "the ranks failed different calls (%d and %d)", lowest, highest);
  const char* expect = std::getenv("MPITEST_EXPECT_FAILURE");
  if (expect) MPITEST_CHECK((failed_at >= 0) == (std::strcmp(expect, "1") == 0), "failure at call %d, expected %s", failed_at, expect);
  MPI_Comm_free(&comm);
  return calls;
}

}  // namespace mpitest
