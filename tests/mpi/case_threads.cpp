// Two threads reducing at the same time, each on its own communicator (as Horovod or PyTorch run
// MPI from background threads): every result must still be exact and every call intercepted.
#include <thread>
#include <vector>

#include "cases.hpp"
#include "harness.hpp"
#include "sum_checks.hpp"

namespace mpitest {

int case_threads() {
  constexpr int kThreads = 2, kCalls = 20;
  // Communicators are created here, in the same order on every rank; the threads only reduce.
  std::vector<MPI_Comm> comms(kThreads, MPI_COMM_NULL);
  for (MPI_Comm& c : comms) MPI_Comm_dup(MPI_COMM_WORLD, &c);

  const StatsWindow window;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t)
    threads.emplace_back([t, comm = comms[t]] {
      for (int i = 0; i < kCalls; ++i) {
        // Different sizes in the two threads, so their calls overlap in ever-changing ways.
        const std::int64_t count = 1009 + 4099 * i + 37 * t;
        check_integer_sum({comm, "thread " + std::to_string(t) + " dup", count, i % 2 == 1, MPI_FLOAT, 1000 * t + i,
                           /*count_stats=*/false});
      }
    });
  for (auto& th : threads) th.join();

  // Process-wide counters: per call they would mix both threads, so check the totals. Each
  // check also made one passthrough call (the cross-rank hash comparison).
  std::uint64_t intercepted = 0, bytes = 0;
  for (int t = 0; t < kThreads; ++t)
    for (int i = 0; i < kCalls; ++i) {
      const std::int64_t count = 1009 + 4099 * i + 37 * t;
      if (must_intercept(count, comms[t])) ++intercepted, bytes += static_cast<std::uint64_t>(count) * sizeof(float);
    }
  const std::uint64_t calls = kThreads * kCalls;
  window.expect(intercepted, calls - intercepted + calls, bytes, "two threads on two communicators");

  for (MPI_Comm& c : comms) MPI_Comm_free(&c);
  return kThreads * kCalls;
}

}  // namespace mpitest
