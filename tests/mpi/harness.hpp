// What every case of allreduce_check shares: failing loudly, reading the preloaded library's
// counters, predicting what the library must do with a call, and comparing results across ranks.
#pragma once

#include <mpi.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "optireduce/optireduce.h"

namespace mpitest {

// Prints "allreduce_check [rank r] FAIL: ..." and aborts the whole job (non-zero mpirun exit).
[[noreturn]] void fail(const char* format, ...) __attribute__((format(printf, 1, 2)));

// Collective over MPI_COMM_WORLD, reached by every rank alike: what the case was to check could
// not be told on this run (a host too loaded for enough calls to qualify). Prints the reason,
// finalizes MPI and exits 77, which CTest counts as skipped, after every other check passed.
[[noreturn]] void inconclusive(const char* format, ...) __attribute__((format(printf, 1, 2)));

#define MPITEST_CHECK(condition, ...) \
  do {                                \
    if (!(condition)) ::mpitest::fail(__VA_ARGS__); \
  } while (0)

// The library's counters of this process, looked up with dlsym: a test never links the library,
// it must be preloaded exactly as a user's job would preload it.
optireduce_process_stats process_stats();

// What the library must do with a call, from the same environment the library reads.
struct Rule {
  bool engine_on = true;             // OPTIREDUCE_MODE is not "off"
  std::uint64_t min_bytes = 1 << 20; // OPTIREDUCE_MIN_BYTES
};
const Rule& rule();
// Eligible means: 4-byte float sum on an intracommunicator of 2+ ranks, big enough, engine on.
// Callers only ask about MPI_FLOAT/MPI_REAL sums; everything else is never intercepted.
bool must_intercept(std::int64_t count, MPI_Comm comm);

// Counts what the library did between its construction and expect(): the calls under test run in
// between, helper MPI calls (hash agreement, references through PMPI) stay outside.
class StatsWindow {
 public:
  StatsWindow();
  // Exactly `intercepted` engine calls of `bytes` payload in total, exactly `passthrough`
  // forwarded calls, nothing dropped, no engine failure.
  void expect(std::uint64_t intercepted, std::uint64_t passthrough, std::uint64_t bytes, const std::string& what) const;

 private:
  optireduce_process_stats before_;
};

// The C API of the preloaded library, looked up with dlsym (fails the job when it is missing).
using LastCall = int (*)(MPI_Comm, optireduce_call_stats*);
using SetMode = int (*)(MPI_Comm, const char*);
void* library_symbol(const char* name);
template <typename F>
F lookup(const char* name) {
  return reinterpret_cast<F>(library_symbol(name));
}
optireduce_call_stats last_call(MPI_Comm comm);

std::uint64_t hash_bytes(const void* data, std::size_t bytes);
// Fails unless `data` is bitwise identical on every rank of comm. Makes one MPI_UINT64_T
// MPI_Allreduce (ineligible, so one passthrough call).
void expect_same_on_all_ranks(const void* data, std::size_t bytes, MPI_Comm comm, const std::string& what);

// Integer-valued floats in [-1000, 1000], different per rank and index and salt: any summation
// order over up to 5 ranks is exact, so the engine must match PMPI bit for bit.
std::vector<float> integer_pattern(std::int64_t count, int rank, int salt);
// Fails at the first element that differs bitwise, naming it.
void expect_bitwise_equal(const std::vector<float>& got, const std::vector<float>& want, const std::string& what);

int comm_rank(MPI_Comm comm);
int comm_size(MPI_Comm comm);
int world_rank();

}  // namespace mpitest
