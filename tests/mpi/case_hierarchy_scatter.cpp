// hierarchy_reduce_scatter: reduce-scatters on a communicator spread over several hosts with
// several ranks on some (run under scripts/cluster.sh --ranks-per-host; tests/cluster/
// mpi_hierarchy.sh), so the engine takes the three-stage call. MPI_Reduce_scatter_block on even
// calls; MPI_Reduce_scatter on odd ones, where each host's first rank owns its second rank's
// block too and the second owns none (each host's part unchanged, empty blocks in the call).
// Every call ran by the engine and succeeded; each rank's block is, where no rank's call was
// bounded, bitwise the exact sum; else every entry is its own host's part of the sum plus some of
// the other hosts' (a lost contribution is left out, never rescaled), and every entry that is not
// the exact sum is counted as dropped. The hosts are told apart by processor name (cluster.sh
// gives each its own). MPITEST_FLOATS (default 1M) floats per call in all, MPITEST_CALLS
// (default 30) calls.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <map>
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

// The host of every rank, numbered by its lowest rank.
std::vector<int> hosts_of_ranks(MPI_Comm comm) {
  char name[MPI_MAX_PROCESSOR_NAME] = {};
  int length = 0;
  MPI_Get_processor_name(name, &length);
  const int n = comm_size(comm);
  std::vector<char> all(static_cast<std::size_t>(n) * MPI_MAX_PROCESSOR_NAME);
  MPI_Allgather(name, MPI_MAX_PROCESSOR_NAME, MPI_CHAR, all.data(), MPI_MAX_PROCESSOR_NAME, MPI_CHAR, comm);
  std::map<std::string, int> number;
  std::vector<int> host(static_cast<std::size_t>(n));
  for (int r = 0; r < n; ++r) {
    const std::string h(all.data() + static_cast<std::size_t>(r) * MPI_MAX_PROCESSOR_NAME);
    host[static_cast<std::size_t>(r)] = number.emplace(h, static_cast<int>(number.size())).first->second;
  }
  return host;
}

}  // namespace

int case_hierarchy_reduce_scatter() {
  MPI_Comm comm = MPI_COMM_WORLD;
  const int n = comm_size(comm), me = comm_rank(comm);
  const int block = static_cast<int>(env_long("MPITEST_FLOATS", 1 << 20) / n);
  const int calls = static_cast<int>(env_long("MPITEST_CALLS", 30));
  const std::vector<int> host = hosts_of_ranks(comm);
  int hosts = 0;
  for (int h : host) hosts = std::max(hosts, h + 1);
  // Odd calls' counts: a host's first rank takes its second rank's block too.
  std::vector<int> shifted(static_cast<std::size_t>(n), block);
  for (int r = 1; r < n; ++r)
    if (host[static_cast<std::size_t>(r)] == host[static_cast<std::size_t>(r - 1)] &&
        (r < 2 || host[static_cast<std::size_t>(r - 2)] != host[static_cast<std::size_t>(r)]))
      shifted[static_cast<std::size_t>(r - 1)] += block, shifted[static_cast<std::size_t>(r)] = 0;
  const std::int64_t total = static_cast<std::int64_t>(block) * n;
  int bounded_calls = 0;
  std::uint64_t dropped = 0;
  for (int c = 0; c < calls; ++c) {
    const bool blocks = c % 2 == 0;
    const std::vector<int> counts = blocks ? std::vector<int>(static_cast<std::size_t>(n), block) : shifted;
    std::int64_t begin = 0;
    for (int r = 0; r < me; ++r) begin += counts[static_cast<std::size_t>(r)];
    const int mine = counts[static_cast<std::size_t>(me)];
    const auto input = integer_pattern(total, me, c);
    std::vector<float> got(static_cast<std::size_t>(mine));
    const std::uint64_t before = last_call(comm).sequence;
    const int rc = blocks ? MPI_Reduce_scatter_block(input.data(), got.data(), block, MPI_FLOAT, MPI_SUM, comm)
                          : MPI_Reduce_scatter(input.data(), got.empty() ? nullptr : got.data(), counts.data(), MPI_FLOAT, MPI_SUM, comm);
    MPITEST_CHECK(rc == MPI_SUCCESS, "hierarchy_reduce_scatter (call %d): returned %d", c, rc);
    const optireduce_call_stats call = last_call(comm);
    MPITEST_CHECK(call.sequence == before + 1 && call.ok == 1 && call.collective == OPTIREDUCE_COLLECTIVE_REDUCE_SCATTER &&
                      call.entries == static_cast<std::uint64_t>(mine),
                  "hierarchy_reduce_scatter (call %d): engine call %llu, ok %d, collective %d, %llu entries", c,
                  static_cast<unsigned long long>(call.sequence), call.ok, call.collective,
                  static_cast<unsigned long long>(call.entries));
    // Each host's sum over this rank's block.
    std::vector<std::vector<double>> host_sum(static_cast<std::size_t>(hosts), std::vector<double>(got.size(), 0.0));
    for (int r = 0; r < n; ++r) {
      const auto theirs = integer_pattern(total, r, c);
      for (std::size_t i = 0; i < got.size(); ++i)
        host_sum[static_cast<std::size_t>(host[static_cast<std::size_t>(r)])][i] += theirs[static_cast<std::size_t>(begin) + i];
    }
    int any_bounded = call.kind == OPTIREDUCE_CALL_BOUNDED ? 1 : 0;
    MPI_Allreduce(MPI_IN_PLACE, &any_bounded, 1, MPI_INT, MPI_MAX, comm);
    bounded_calls += any_bounded;
    dropped += call.dropped_entries;
    const unsigned own = static_cast<unsigned>(host[static_cast<std::size_t>(me)]);
    std::uint64_t wrong = 0;
    for (std::size_t i = 0; i < got.size(); ++i) {
      double full = 0;
      for (const auto& s : host_sum) full += s[i];
      if (got[i] == static_cast<float>(full)) continue;
      MPITEST_CHECK(any_bounded, "hierarchy_reduce_scatter (call %d, exact): element %zu of the block is %.9g, the sum %.9g", c,
                    i, static_cast<double>(got[i]), full);
      ++wrong;
      bool explained = false;
      for (unsigned subset = 0; subset < (1u << hosts) && !explained; ++subset) {
        if (!(subset >> own & 1u)) continue;
        double partial = 0;
        for (int h = 0; h < hosts; ++h)
          if (subset >> h & 1u) partial += host_sum[static_cast<std::size_t>(h)][i];
        explained = got[i] == static_cast<float>(partial);
      }
      MPITEST_CHECK(explained, "hierarchy_reduce_scatter (call %d): element %zu is %.9g, no set of hosts' sums gives it", c, i,
                    static_cast<double>(got[i]));
    }
    MPITEST_CHECK(wrong <= call.dropped_entries, "hierarchy_reduce_scatter (call %d): %llu entries wrong, %llu counted as dropped",
                  c, static_cast<unsigned long long>(wrong), static_cast<unsigned long long>(call.dropped_entries));
  }
  if (me == 0)
    std::printf("hierarchy_reduce_scatter: %d calls of %lld floats on %d ranks over %d hosts, %d bounded somewhere, %llu entries "
                "dropped on rank 0\n",
                calls, static_cast<long long>(total), n, hosts, bounded_calls, static_cast<unsigned long long>(dropped));
  return calls;
}

}  // namespace mpitest
