// One direction between two ranks goes down at the end of a calibration call, for longer than
// the call waits for the peers' word, under MPI_ERRORS_RETURN. The outage is made outside the
// job (tests/netem/calibration_outage.sh: nftables in a network namespace): before call
// MPITEST_OUTAGE_CALL (of MPITEST_CALLS, every one a calibration call) every rank has left the
// call before, rank 0 asks for the outage by creating MPITEST_OUTAGE_DIR/request and waits for
// MPITEST_OUTAGE_DIR/ready, and a barrier starts the call on every rank together.
// What must happen: that call fails with MPI_ERR_OTHER on every rank (every call before it is
// exact and ran in the engine); every later call goes to the MPI on every rank with exact
// results; MPI_Barrier then completes; every rank has the same outcome for every call. Each rank
// prints one line naming the call that failed and its error.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
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

bool exists(const std::string& path) {
  if (FILE* f = std::fopen(path.c_str(), "r")) {
    std::fclose(f);
    return true;
  }
  return false;
}

// Rank 0 asks the script for the outage and waits until it is in place (bounded: a script that
// never answers fails the job instead of hanging it).
void ask_for_outage(const std::string& dir, int me) {
  if (me != 0) return;
  FILE* request = std::fopen((dir + "/request").c_str(), "w");
  MPITEST_CHECK(request != nullptr, "cannot create %s/request", dir.c_str());
  std::fclose(request);
  const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (!exists(dir + "/ready")) {
    MPITEST_CHECK(std::chrono::steady_clock::now() < give_up, "the outage was not in place within 60 s (%s/ready)", dir.c_str());
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
}

// Per call: 0 ran in the engine and succeeded, 1 failed, 2 went to the MPI and succeeded.
enum Outcome : int { kEngine = 0, kFailed = 1, kMpi = 2 };
const char* outcome_name(int o) { return o == kEngine ? "engine" : o == kFailed ? "FAILED" : "mpi"; }

}  // namespace

int case_outage() {
  const int calls = env_int("MPITEST_CALLS", 6), outage_call = env_int("MPITEST_OUTAGE_CALL", 3);
  const char* dir = std::getenv("MPITEST_OUTAGE_DIR");
  MPITEST_CHECK(dir && *dir, "MPITEST_OUTAGE_DIR is not set (run by tests/netem/calibration_outage.sh)");
  MPITEST_CHECK(outage_call >= 1 && outage_call < calls, "MPITEST_OUTAGE_CALL=%d: from 1 to MPITEST_CALLS-1", outage_call);
  MPI_Comm comm = MPI_COMM_NULL;
  MPI_Comm_dup(MPI_COMM_WORLD, &comm);
  MPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN);
  const int me = comm_rank(comm), ranks = comm_size(comm);
  // Full datagrams only (the script's filter tells the call's data from its words by size):
  // four 32 KiB chunks per rank's shard.
  const std::int64_t count = std::int64_t{ranks} * 4 * 8192;
  std::vector<int> outcome(static_cast<std::size_t>(calls), kEngine);
  int failed_at = -1;
  std::string error;
  double failed_ms = 0;
  for (int call = 0; call < calls; ++call) {
    const auto input = integer_pattern(count, me, call);
    std::vector<float> want(input.size()), got(input.size());
    PMPI_Allreduce(input.data(), want.data(), static_cast<int>(count), MPI_FLOAT, MPI_SUM, comm);
    if (call == outage_call) {
      PMPI_Barrier(comm);  // every rank has left the call before
      ask_for_outage(dir, me);
      PMPI_Barrier(comm);
    }
    const std::uint64_t before = last_call(comm).sequence;
    const int rc = MPI_Allreduce(input.data(), got.data(), static_cast<int>(count), MPI_FLOAT, MPI_SUM, comm);
    const optireduce_call_stats stats = last_call(comm);
    if (rc != MPI_SUCCESS) {
      int error_class = 0, length = 0;
      char text[MPI_MAX_ERROR_STRING] = {};
      MPI_Error_class(rc, &error_class);
      MPI_Error_string(rc, text, &length);
      MPITEST_CHECK(error_class == MPI_ERR_OTHER, "call %d failed with error class %d, not MPI_ERR_OTHER: %s", call, error_class, text);
      MPITEST_CHECK(failed_at < 0, "call %d failed after call %d had failed: later calls must go to the MPI", call, failed_at);
      MPITEST_CHECK(stats.sequence == before + 1 && !stats.ok, "call %d failed but the engine did not fail it", call);
      failed_at = call;
      error = text;
      failed_ms = stats.latency_us / 1000;
      outcome[static_cast<std::size_t>(call)] = kFailed;
      continue;
    }
    expect_bitwise_equal(got, want, "call " + std::to_string(call));
    if (failed_at >= 0) {
      MPITEST_CHECK(stats.sequence == before, "call %d ran in the engine after the engine failed", call);
      outcome[static_cast<std::size_t>(call)] = kMpi;
      continue;
    }
    MPITEST_CHECK(stats.sequence == before + 1, "call %d (before any failure) did not run in the engine", call);
    MPITEST_CHECK(stats.kind == OPTIREDUCE_CALL_CALIBRATION, "call %d is not a calibration call (kind %d): raise OPTIREDUCE_CALIBRATION_CALLS",
                  call, stats.kind);
  }
  MPI_Barrier(comm);
  if (failed_at < 0) std::printf("outage: rank %d: no call failed\n", me);
  else std::printf("outage: rank %d: call %d of %d failed after %.0f ms: %s\n", me, failed_at, calls, failed_ms, error.c_str());
  std::fflush(stdout);
  // Every rank's outcomes, compared on rank 0.
  std::vector<int> all(static_cast<std::size_t>(calls) * static_cast<std::size_t>(ranks));
  PMPI_Gather(outcome.data(), calls, MPI_INT, all.data(), calls, MPI_INT, 0, comm);
  if (me == 0) {
    for (int r = 0; r < ranks; ++r) {
      std::string line;
      for (int c = 0; c < calls; ++c) line += std::string(c ? " " : "") + outcome_name(all[static_cast<std::size_t>(r * calls + c)]);
      std::printf("outage: rank %d calls: %s\n", r, line.c_str());
    }
    std::fflush(stdout);
    for (int r = 1; r < ranks; ++r)
      for (int c = 0; c < calls; ++c)
        MPITEST_CHECK(all[static_cast<std::size_t>(r * calls + c)] == all[static_cast<std::size_t>(c)],
                      "call %d: rank %d %s, rank 0 %s", c, r, outcome_name(all[static_cast<std::size_t>(r * calls + c)]),
                      outcome_name(all[static_cast<std::size_t>(c)]));
  }
  MPITEST_CHECK(failed_at >= 0, "no call failed: the outage did not fail the call it cut");
  MPITEST_CHECK(failed_at == outage_call, "call %d failed, not call %d, the call the outage cut", failed_at, outage_call);
  MPI_Comm_free(&comm);
  return calls;
}

}  // namespace mpitest
