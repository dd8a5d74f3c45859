// A rank that did not load the library never joins optireduce_init's all-gather at MPI_Init, and the
// ranks that did would wait in it for good. Open MPI's `-x LD_PRELOAD=...` reaches only the ranks
// of its own app context, so an MPMD launch (`a : b`) that gives it once loads the library on
// some ranks only. So before that all-gather: every other rank says hello to rank 0 with a
// point-to-point message; rank 0 waits for all of them, at most a while, and answers each rank
// that said hello whether all did. A rank without the library matches none of this (its
// collectives never match point-to-point messages). Where a rank is missing, the job cannot go on
// (no exit of the ranks with the library is orderly while the others wait in their collectives):
// one line names the missing ranks, and the job is aborted.
#include "loaded_everywhere.hpp"

#include <mpi.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

namespace optireduce::pmpi {
namespace {

using Clock = std::chrono::steady_clock;

constexpr int kTag = 0x4f52;                        // "OR", within every MPI's tag range
constexpr std::uint64_t kHello = 0x4f505449524544;  // "OPTIRED"
constexpr std::uint64_t kAllLoaded = 1, kSomeMissing = 2;
constexpr auto kLongestWait = std::chrono::seconds(60);

// Ranks reach this at once (MPI_Init ends with every rank's fence): a minute, or
// OPTIREDUCE_WATCHDOG_MS where that is shorter (how long a wait for a peer lasts before it fails).
Clock::duration wait_limit() {
  Clock::duration limit = kLongestWait;
  if (const char* v = std::getenv("OPTIREDUCE_WATCHDOG_MS"); v && *v) {
    char* end = nullptr;
    const unsigned long long ms = std::strtoull(v, &end, 10);
    if (*end == '\0' && ms > 0) limit = std::min<Clock::duration>(limit, std::chrono::milliseconds(ms));
  }
  return limit;
}

std::string seconds_text(Clock::duration d) {
  const double s = std::chrono::duration<double>(d).count();
  char text[32];
  std::snprintf(text, sizeof text, "%g s", s);
  return text;
}

// Until every request completed or the deadline; true when they all did.
bool wait_all(std::vector<MPI_Request>& requests, Clock::time_point deadline) {
  for (;;) {
    int done = 0;
    PMPI_Testall(static_cast<int>(requests.size()), requests.data(), &done, MPI_STATUSES_IGNORE);
    if (done) return true;
    if (Clock::now() >= deadline) return false;
    std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
}

constexpr const char* kRemedy =
    ": preload it on every rank (Open MPI's -x LD_PRELOAD=... reaches only the ranks of its own app context: give it "
    "again after each ':')";

void say(const std::string& line) {
  std::fprintf(stderr, "optireduce: %s\n", line.c_str());
  std::fflush(stderr);
}

bool rank_zero(int ranks, Clock::duration limit) {
  std::vector<std::uint64_t> hello(static_cast<std::size_t>(ranks), 0);
  std::vector<MPI_Request> requests(static_cast<std::size_t>(ranks), MPI_REQUEST_NULL);
  for (int r = 1; r < ranks; ++r) PMPI_Irecv(&hello[r], 1, MPI_UINT64_T, r, kTag, MPI_COMM_WORLD, &requests[r]);
  wait_all(requests, Clock::now() + limit);
  std::string missing;
  std::vector<int> present;
  for (int r = 1; r < ranks; ++r) {
    int done = requests[r] == MPI_REQUEST_NULL;
    if (!done) PMPI_Test(&requests[r], &done, MPI_STATUS_IGNORE);
    if (done && hello[r] == kHello) {
      present.push_back(r);
      continue;
    }
    missing += (missing.empty() ? "" : ", ") + std::to_string(r);
    if (!done) {
      PMPI_Cancel(&requests[r]);
      PMPI_Request_free(&requests[r]);
    }
  }
  // The line goes out before any verdict: a rank told of a missing one ends the job.
  if (!missing.empty())
    say("liboptireduce.so is not loaded on rank" + std::string(missing.find(',') == std::string::npos ? " " : "s ") + missing +
        " (no word from it within " + seconds_text(limit) + " of MPI_Init)" + kRemedy);
  const std::uint64_t verdict = missing.empty() ? kAllLoaded : kSomeMissing;
  for (int r : present) PMPI_Send(&verdict, 1, MPI_UINT64_T, r, kTag, MPI_COMM_WORLD);
  return missing.empty();
}

bool other_rank(Clock::duration limit) {
  std::uint64_t verdict = 0;
  std::vector<MPI_Request> requests(2, MPI_REQUEST_NULL);
  PMPI_Isend(&kHello, 1, MPI_UINT64_T, 0, kTag, MPI_COMM_WORLD, &requests[0]);
  PMPI_Irecv(&verdict, 1, MPI_UINT64_T, 0, kTag, MPI_COMM_WORLD, &requests[1]);
  // Rank 0 answers by the end of its own wait, which began about when this one did.
  if (wait_all(requests, Clock::now() + 2 * limit)) return verdict == kAllLoaded;  // rank 0 named the missing ranks
  say("liboptireduce.so is not loaded on rank 0 (no answer within " + seconds_text(2 * limit) + " of MPI_Init)" + kRemedy);
  return false;
}

}  // namespace

bool loaded_everywhere() {
  int rank = 0, ranks = 1;
  PMPI_Comm_rank(MPI_COMM_WORLD, &rank);
  PMPI_Comm_size(MPI_COMM_WORLD, &ranks);
  if (ranks < 2) return true;
  const Clock::duration limit = wait_limit();
  return rank == 0 ? rank_zero(ranks, limit) : other_rank(limit);
}

}  // namespace optireduce::pmpi
