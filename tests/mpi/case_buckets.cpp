// A data-parallel training step as DDP and Horovod shape it: several gradient buckets of
// distinct sizes, each its own buffer, reduced in place in reverse order, back to back (so peers
// run a call ahead with another size), step after step. Every bucket is then checked bit for bit
// against the sum computed here from every rank's deterministic input.
#include <vector>

#include "cases.hpp"
#include "harness.hpp"

namespace mpitest {

int case_buckets() {
  constexpr int kBuckets = 7;
  constexpr int kSteps = 15;
  const int ranks = comm_size(MPI_COMM_WORLD), me = comm_rank(MPI_COMM_WORLD);
  std::vector<std::vector<float>> buckets(kBuckets);
  int checked = 0;
  for (int step = 0; step < kSteps; ++step) {
    for (int b = kBuckets - 1; b >= 0; --b) {
      // 1 MiB .. 2.1 MiB: one size class, seven layouts.
      const std::int64_t count = (1024 + 155 * b) * 1024 / 4 + b;
      buckets[b] = integer_pattern(count, me, step * kBuckets + b);
      const int rc = MPI_Allreduce(MPI_IN_PLACE, buckets[b].data(), static_cast<int>(count), MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
      MPITEST_CHECK(rc == MPI_SUCCESS, "step %d bucket %d: MPI_Allreduce returned %d", step, b, rc);
    }
    for (int b = 0; b < kBuckets; ++b) {
      const auto count = static_cast<std::int64_t>(buckets[b].size());
      std::vector<float> want = integer_pattern(count, 0, step * kBuckets + b);
      for (int r = 1; r < ranks; ++r) {
        const auto theirs = integer_pattern(count, r, step * kBuckets + b);
        for (std::int64_t i = 0; i < count; ++i) want[i] += theirs[i];
      }
      expect_bitwise_equal(buckets[b], want, "step " + std::to_string(step) + " bucket " + std::to_string(b));
      ++checked;
    }
  }
  return checked;
}

}  // namespace mpitest
