// hierarchy_reduce_scatter: reduce-scatters on a communicator spread over several hosts with
// several ranks on some (run under scripts/cluster.sh --ranks-per-host; tests/cluster/
// mpi_hierarchy.sh), so the engine takes the three-stage call. MPI_Reduce_scatter_block on even
// calls; MPI_Reduce_scatter on odd ones, where each host's first rank owns its second rank's
// block too and the second owns none (each host's part unchanged, empty blocks in the call).
// Every call ran by the engine and succeeded; each rank's block is, where no rank's call was
// bounded, bitwise the exact sum; else every entry is its own host's part of the sum plus some of
// the other hosts' (a lost contribution is left out, never rescaled), and every entry that is not
// the exact sum is counted as dropped. The hosts are told apart by processor name (cluster.sh
// gives each its own). MPITEST_FLOATS (default 1M) elements per call in all, MPITEST_CALLS
// (default 30) calls. MPITEST_FORMAT=half: the first half of the calls in fp16, the rest in bf16 (a
// 2-byte datatype and the user op that sums it, as jobs make them), of small integers, whose sums
// and partial sums are exact in both formats.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <map>
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

// Rank r's element i in call c: an integer in -8..8 (16-bit calls).
float small_integer(int rank, int call, std::int64_t i) {
  const std::uint64_t x = static_cast<std::uint64_t>(i) * 2654435761ull + static_cast<std::uint64_t>(rank + 1) * 97531ull +
                          static_cast<std::uint64_t>(call) * 7919ull;
  return static_cast<float>(static_cast<int>(x % 17) - 8);
}

// One call's inputs, its datatype and op, and the result read back as floats.
struct Format {
  bool wide = true;
  Half half = Half::float16;
  MPI_Datatype type = MPI_FLOAT;
  MPI_Op op = MPI_SUM;
  int code = OPTIREDUCE_FORMAT_FLOAT32;
  std::vector<float> values(std::int64_t count, int rank, int call) const {
    if (wide) return integer_pattern(count, rank, call);
    std::vector<float> v(static_cast<std::size_t>(count));
    for (std::int64_t i = 0; i < count; ++i) v[static_cast<std::size_t>(i)] = small_integer(rank, call, i);
    return v;
  }
};

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
  const char* format_env = std::getenv("MPITEST_FORMAT");
  const bool half = format_env && std::string(format_env) == "half";
  MPI_Datatype two_bytes = MPI_DATATYPE_NULL;
  MPI_Op fp16_sum = MPI_OP_NULL, bf16_sum = MPI_OP_NULL;
  if (half) {
    MPI_Type_contiguous(2, MPI_BYTE, &two_bytes);
    MPI_Type_commit(&two_bytes);
    MPI_Op_create(&half_sum<Half::float16>, 1, &fp16_sum);
    MPI_Op_create(&half_sum<Half::bfloat16>, 1, &bf16_sum);
  }
  int bounded_calls = 0;
  std::uint64_t dropped = 0;
  for (int c = 0; c < calls; ++c) {
    const bool blocks = c % 2 == 0;
    const std::vector<int> counts = blocks ? std::vector<int>(static_cast<std::size_t>(n), block) : shifted;
    std::int64_t begin = 0;
    for (int r = 0; r < me; ++r) begin += counts[static_cast<std::size_t>(r)];
    const int mine = counts[static_cast<std::size_t>(me)];
    Format f;
    if (half) {
      f.wide = false, f.half = c < calls / 2 ? Half::float16 : Half::bfloat16, f.type = two_bytes;
      f.op = f.half == Half::float16 ? fp16_sum : bf16_sum;
      f.code = f.half == Half::float16 ? OPTIREDUCE_FORMAT_FLOAT16 : OPTIREDUCE_FORMAT_BFLOAT16;
    }
    const auto input = f.values(total, me, c);
    std::vector<float> got(static_cast<std::size_t>(mine));
    std::vector<std::uint16_t> narrow_in(f.wide ? 0 : input.size()), narrow_out(f.wide ? 0 : got.size());
    for (std::size_t i = 0; i < narrow_in.size(); ++i) narrow_in[i] = narrow(f.half, input[i]);
    const void* send = f.wide ? static_cast<const void*>(input.data()) : narrow_in.data();
    void* receive = f.wide ? static_cast<void*>(got.data()) : narrow_out.data();
    const std::uint64_t before = last_call(comm).sequence;
    const int rc = blocks ? MPI_Reduce_scatter_block(send, receive, block, f.type, f.op, comm)
                          : MPI_Reduce_scatter(send, got.empty() ? nullptr : receive, counts.data(), f.type, f.op, comm);
    MPITEST_CHECK(rc == MPI_SUCCESS, "hierarchy_reduce_scatter (call %d): returned %d", c, rc);
    for (std::size_t i = 0; i < narrow_out.size(); ++i) got[i] = widen(f.half, narrow_out[i]);
    const optireduce_call_stats call = last_call(comm);
    MPITEST_CHECK(call.sequence == before + 1 && call.ok == 1 && call.collective == OPTIREDUCE_COLLECTIVE_REDUCE_SCATTER &&
                      call.entries == static_cast<std::uint64_t>(mine) && call.format == f.code,
                  "hierarchy_reduce_scatter (call %d): engine call %llu, ok %d, collective %d, format %d, %llu entries", c,
                  static_cast<unsigned long long>(call.sequence), call.ok, call.collective, call.format,
                  static_cast<unsigned long long>(call.entries));
    // Each host's sum over this rank's block.
    std::vector<std::vector<double>> host_sum(static_cast<std::size_t>(hosts), std::vector<double>(got.size(), 0.0));
    for (int r = 0; r < n; ++r) {
      const auto theirs = f.values(total, r, c);
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
  if (half) {
    MPI_Op_free(&fp16_sum);
    MPI_Op_free(&bf16_sum);
    MPI_Type_free(&two_bytes);
  }
  if (me == 0)
    std::printf("hierarchy_reduce_scatter%s: %d calls of %lld elements on %d ranks over %d hosts, %d bounded somewhere, %llu entries "
                "dropped on rank 0\n",
                half ? " (fp16, then bf16)" : "", calls, static_cast<long long>(total), n, hosts, bounded_calls,
                static_cast<unsigned long long>(dropped));
  return calls;
}

}  // namespace mpitest
