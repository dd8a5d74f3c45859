// Integer-valued sums compared bit for bit with PMPI_Allreduce.
#include <algorithm>
#include <vector>

#include "cases.hpp"
#include "communicators.hpp"
#include "harness.hpp"
#include "sum_checks.hpp"

namespace mpitest {
namespace {

// Counts that stress the shard layout: empty, fewer elements than ranks (empty shards), one per
// rank and around it, primes (uneven shards), and 262145 (just over one 1 MiB chunk).
std::vector<std::int64_t> counts_for(int ranks) {
  std::vector<std::int64_t> counts = {0, 1, 2, ranks - 1, ranks, ranks + 1, 7, 1009, 262145};
  std::sort(counts.begin(), counts.end());
  counts.erase(std::unique(counts.begin(), counts.end()), counts.end());
  return counts;
}

}  // namespace

int case_exact() {
  int checked = 0, salt = 0;
  auto comms = make_communicators();
  for (const NamedComm& nc : comms) {
    if (nc.comm == MPI_COMM_NULL) continue;
    for (std::int64_t count : counts_for(comm_size(nc.comm)))
      for (bool in_place : {false, true}) {
        check_integer_sum({nc.comm, nc.name, count, in_place, MPI_FLOAT, ++salt});
        ++checked;
      }
  }
  free_communicators(comms);

  // Fortran's REAL handles are eligible from C too.
  for (MPI_Datatype type : {MPI_REAL, MPI_REAL4}) {
    check_integer_sum({MPI_COMM_WORLD, "MPI_COMM_WORLD", 1009, false, type, ++salt});
    ++checked;
  }

  // Engines are torn down when their communicator is freed; a new communicator gets a new one.
  for (int round = 0; round < 2; ++round) {
    MPI_Comm dup = MPI_COMM_NULL;
    MPI_Comm_dup(MPI_COMM_WORLD, &dup);
    check_integer_sum({dup, "dup of world, round " + std::to_string(round), 65537, round == 1, MPI_FLOAT, ++salt});
    MPI_Comm_free(&dup);
    ++checked;
  }
  return checked;
}

int case_large() {
  constexpr std::int64_t kCount = (std::int64_t{1} << 24) + 3;  // 64 MiB, many chunks per shard
  check_integer_sum({MPI_COMM_WORLD, "MPI_COMM_WORLD", kCount, false, MPI_FLOAT, 1});
  check_integer_sum({MPI_COMM_WORLD, "MPI_COMM_WORLD", kCount, true, MPI_FLOAT, 2});
  return 2;
}

int case_threshold() {
  // Meant for the default OPTIREDUCE_MIN_BYTES (1 MiB); works for any multiple of 4.
  const auto at = static_cast<std::int64_t>(rule().min_bytes / sizeof(float));
  int checked = 0;
  for (std::int64_t count : {at - 1, at, at + 1})
    if (count >= 0) {
      check_integer_sum({MPI_COMM_WORLD, "MPI_COMM_WORLD", count, false, MPI_FLOAT, static_cast<int>(count % 97)});
      ++checked;
    }
  check_integer_sum({MPI_COMM_WORLD, "MPI_COMM_WORLD", 7, true, MPI_FLOAT, 3});
  return checked + 1;
}

}  // namespace mpitest
