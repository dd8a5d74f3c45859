// MPI_Reduce_scatter_block and MPI_Reduce_scatter through the preloaded library.
//
//   reduce_scatter          exact (reliable mode): block and per-rank counts (uneven, zeros, all
//                           zero), in place and not, integer data bitwise equal to a float64
//                           reference, random data within a float32 sum's error of it, the same
//                           bits run to run and as the engine's allreduce of the same data; the
//                           library's counters and last-call figures; what passes through
//   reduce_scatter_bounded  OPTIREDUCE_MODE=bounded past calibration (and OPTIREDUCE_FAULT_DROP if
//                           set): calls turn bounded, every wrong entry is counted as dropped and
//                           is the sum of a subset of the ranks' contributions (never rescaled)
#include <cmath>
#include <cstdio>
#include <cstring>
#include <numeric>
#include <string>
#include <vector>

#include "cases.hpp"
#include "harness.hpp"

namespace mpitest {
namespace {

// Rank p's input for element i of the whole (all blocks) buffer: integer-valued or not.
float input_of(int p, std::int64_t i, int salt, bool integer) {
  const std::uint64_t x = static_cast<std::uint64_t>(i) * 2654435761ull + static_cast<std::uint64_t>(p + 1) * 97531ull +
                          static_cast<std::uint64_t>(salt) * 7919ull;
  const int n = static_cast<int>(x % 2001) - 1000;
  return integer ? static_cast<float>(n) : static_cast<float>(n) * 0.001f + 1.0f / static_cast<float>(p + 3);
}

struct Shape {
  std::string name;
  std::vector<int> counts;  // one per rank
  bool block;               // MPI_Reduce_scatter_block (all counts equal)
};

std::int64_t total_of(const std::vector<int>& counts) { return std::accumulate(counts.begin(), counts.end(), std::int64_t{0}); }
std::int64_t begin_of(const std::vector<int>& counts, int rank) {
  return std::accumulate(counts.begin(), counts.begin() + rank, std::int64_t{0});
}

std::vector<Shape> shapes_for(int ranks) {
  std::vector<Shape> s;
  for (int n : {0, 1, 7, 1009, 65537}) s.push_back({"block of " + std::to_string(n), std::vector<int>(ranks, n), true});
  std::vector<int> uneven(ranks), zeros(ranks), one(ranks, 0);
  for (int p = 0; p < ranks; ++p) {
    uneven[p] = 1000 + 997 * p + (p % 2) * 65536;  // some blocks over one 256 KiB chunk
    zeros[p] = p % 2 ? 0 : 4099 + p;               // every other rank owns nothing
  }
  one[ranks - 1] = 300001;  // one rank owns everything
  s.push_back({"uneven counts", uneven, false});
  s.push_back({"zeros in counts", zeros, false});
  s.push_back({"all on the last rank", one, false});
  s.push_back({"all zero", std::vector<int>(ranks, 0), false});
  return s;
}

int call(const Shape& s, const void* send, void* recv, MPI_Datatype type, MPI_Op op, MPI_Comm comm) {
  return s.block ? MPI_Reduce_scatter_block(send, recv, s.counts[0], type, op, comm)
                 : MPI_Reduce_scatter(send, recv, s.counts.data(), type, op, comm);
}

// This rank's block of the float64 sum over ranks.
std::vector<double> reference(const Shape& s, int rank, int ranks, int salt, bool integer) {
  const std::int64_t begin = begin_of(s.counts, rank);
  std::vector<double> want(static_cast<std::size_t>(s.counts[rank]), 0.0);
  for (std::size_t i = 0; i < want.size(); ++i)
    for (int p = 0; p < ranks; ++p) want[i] += input_of(p, begin + static_cast<std::int64_t>(i), salt, integer);
  return want;
}

// Runs one reduce-scatter of `s` through MPI (so through the library) and returns this rank's block.
std::vector<float> run(const Shape& s, bool in_place, int salt, bool integer, MPI_Comm comm = MPI_COMM_WORLD) {
  const int rank = comm_rank(comm);
  const std::int64_t total = total_of(s.counts);
  std::vector<float> input(static_cast<std::size_t>(total));
  for (std::int64_t i = 0; i < total; ++i) input[static_cast<std::size_t>(i)] = input_of(rank, i, salt, integer);
  const std::vector<float> kept = input;
  std::vector<float> out;
  int rc = MPI_SUCCESS;
  if (in_place) {
    rc = call(s, MPI_IN_PLACE, input.data(), MPI_FLOAT, MPI_SUM, comm);
    out.assign(input.begin(), input.begin() + s.counts[rank]);
  } else {
    out.assign(static_cast<std::size_t>(s.counts[rank]), -12345.0f);
    // A rank that owns nothing may pass no receive buffer at all.
    rc = call(s, input.data(), out.empty() ? nullptr : out.data(), MPI_FLOAT, MPI_SUM, comm);
    MPITEST_CHECK(input == kept, "%s: the send buffer changed", s.name.c_str());
  }
  MPITEST_CHECK(rc == MPI_SUCCESS, "%s: returned %d", s.name.c_str(), rc);
  return out;
}

std::string what(const Shape& s, bool in_place, bool integer) {
  return (s.block ? "MPI_Reduce_scatter_block, " : "MPI_Reduce_scatter, ") + s.name + (in_place ? ", in place" : "") +
         (integer ? ", integer data" : ", random data");
}

// Integer data: bitwise the float64 reference. Random data: within what a float32 sum of `ranks`
// terms rounded at each step may be off by.
void check_values(const std::vector<float>& got, const std::vector<double>& want, int ranks, bool integer,
                  const std::string& label) {
  MPITEST_CHECK(got.size() == want.size(), "%s: %zu elements, expected %zu", label.c_str(), got.size(), want.size());
  for (std::size_t i = 0; i < got.size(); ++i) {
    // Each input is at most 4/3 in magnitude; each of the ranks - 1 additions rounds once.
    const double bound = integer ? 0.0 : ranks * std::ldexp(ranks * 4.0 / 3.0, -24);
    MPITEST_CHECK(std::fabs(static_cast<double>(got[i]) - want[i]) <= bound,
                  "%s: element %zu is %.9g, the float64 sum is %.9g (allowed error %.3g)", label.c_str(), i,
                  static_cast<double>(got[i]), want[i], bound);
  }
}

// What the engine must do with a float32 sum of `total` elements on world.
bool served(std::int64_t total) { return must_intercept(total, MPI_COMM_WORLD); }

void check_last_call(const Shape& s, int rank) {
  const optireduce_call_stats last = last_call(MPI_COMM_WORLD);
  MPITEST_CHECK(last.collective == OPTIREDUCE_COLLECTIVE_REDUCE_SCATTER && last.format == OPTIREDUCE_FORMAT_FLOAT32,
                "%s: the last call says collective %d, format %d; expected a float32 reduce-scatter", s.name.c_str(),
                last.collective, last.format);
  MPITEST_CHECK(last.ok == 1 && last.entries == static_cast<std::uint64_t>(s.counts[rank]),
                "%s: the last call says ok %d, %llu entries; expected this rank's block of %d", s.name.c_str(), last.ok,
                static_cast<unsigned long long>(last.entries), s.counts[rank]);
}

std::uint64_t reduce_scatter_calls() {
  const optireduce_process_stats s = process_stats();
  return s.intercepted_by_operation[OPTIREDUCE_COLLECTIVE_REDUCE_SCATTER][OPTIREDUCE_FORMAT_FLOAT32];
}

// Calls the engine must leave to the MPI, each counted under its reason: results still right.
int check_passthrough(int ranks) {
  const int rank = world_rank();
  std::vector<int> counts(ranks, 3);
  std::vector<double> in(3 * static_cast<std::size_t>(ranks), rank + 1.0), out(3);
  {
    StatsWindow w;
    MPITEST_CHECK(MPI_Reduce_scatter(in.data(), out.data(), counts.data(), MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD) == 0, "double");
    w.expect(0, 1, 0, "MPI_Reduce_scatter of doubles");
  }
  MPITEST_CHECK(out[0] == ranks * (ranks + 1) / 2.0, "MPI_Reduce_scatter of doubles passed through: %g", out[0]);
  std::vector<float> fin(3 * static_cast<std::size_t>(ranks), static_cast<float>(rank)), fout(3);
  {
    StatsWindow w;
    MPI_Reduce_scatter_block(fin.data(), fout.data(), 3, MPI_FLOAT, MPI_MAX, MPI_COMM_WORLD);
    w.expect(0, 1, 0, "MPI_Reduce_scatter_block with MPI_MAX");
  }
  MPITEST_CHECK(fout[0] == static_cast<float>(ranks - 1), "MPI_MAX passed through: %g", static_cast<double>(fout[0]));
  {
    StatsWindow w;
    MPI_Reduce_scatter_block(fin.data(), fout.data(), 3, MPI_FLOAT, MPI_SUM, MPI_COMM_SELF);
    w.expect(0, 1, 0, "MPI_Reduce_scatter_block on MPI_COMM_SELF");
  }
  MPITEST_CHECK(fout[0] == static_cast<float>(rank), "one rank passed through: %g", static_cast<double>(fout[0]));
  {
    StatsWindow w;
    MPI_Request request = MPI_REQUEST_NULL;
    MPI_Ireduce_scatter_block(fin.data(), fout.data(), 3, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD, &request);
    MPI_Wait(&request, MPI_STATUS_IGNORE);
    w.expect(0, 1, 0, "MPI_Ireduce_scatter_block");
  }
  MPITEST_CHECK(fout[0] == static_cast<float>(ranks * (ranks - 1) / 2), "MPI_Ireduce_scatter_block: %g",
                static_cast<double>(fout[0]));
  return 4;
}

}  // namespace

int case_reduce_scatter() {
  const int rank = world_rank(), ranks = comm_size(MPI_COMM_WORLD);
  int checked = 0, salt = 0;
  for (const Shape& s : shapes_for(ranks))
    for (bool in_place : {false, true})
      for (bool integer : {true, false}) {
        const std::string label = what(s, in_place, integer);
        const std::int64_t total = total_of(s.counts);
        const std::uint64_t scatters = reduce_scatter_calls();
        StatsWindow w;
        const std::vector<float> got = run(s, in_place, ++salt, integer);
        const bool engine = served(total);
        w.expect(engine ? 1 : 0, engine ? 0 : 1, engine ? static_cast<std::uint64_t>(total) * sizeof(float) : 0, label);
        MPITEST_CHECK(reduce_scatter_calls() == scatters + (engine ? 1 : 0), "%s: not counted as a float32 reduce-scatter",
                      label.c_str());
        if (engine) check_last_call(s, rank);
        check_values(got, reference(s, rank, ranks, salt, integer), ranks, integer, label);
        // Run to run: the same bits.
        MPITEST_CHECK(run(s, in_place, salt, integer) == got, "%s: a second run gave other bits", label.c_str());
        checked += 2;
      }
  // The owner sums in one order whichever collective it serves: an allreduce of the same data,
  // whose balanced shards are the block form's blocks, gives each rank's block bit for bit.
  const Shape even{"block of 65537", std::vector<int>(ranks, 65537), true};
  const std::vector<float> block = run(even, false, 7, false);
  std::vector<float> all(static_cast<std::size_t>(65537) * ranks);
  for (std::size_t i = 0; i < all.size(); ++i) all[i] = input_of(rank, static_cast<std::int64_t>(i), 7, false);
  MPI_Allreduce(MPI_IN_PLACE, all.data(), static_cast<int>(all.size()), MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
  // (The MPI's own two collectives may sum in different orders: only the engine's are compared.)
  if (served(static_cast<std::int64_t>(all.size())))
    MPITEST_CHECK(std::memcmp(all.data() + static_cast<std::size_t>(65537) * rank, block.data(), block.size() * sizeof(float)) == 0,
                  "the reduce-scatter's block differs from the allreduce's slice of the same data");
  expect_same_on_all_ranks(all.data(), all.size() * sizeof(float), MPI_COMM_WORLD, "the allreduce beside the reduce-scatter");
  return checked + 2 + check_passthrough(ranks);
}

int case_reduce_scatter_bounded() {
  const int rank = world_rank(), ranks = comm_size(MPI_COMM_WORLD);
  std::vector<int> counts(ranks);
  for (int p = 0; p < ranks; ++p) counts[p] = 40000 + 1000 * p;
  const Shape s{"uneven counts", counts, false};
  const std::int64_t begin = begin_of(counts, rank);
  int bounded = 0;
  std::uint64_t dropped = 0;
  constexpr int kCalls = 16;
  for (int c = 0; c < kCalls; ++c) {
    const std::vector<float> got = run(s, c % 2 == 1, 100 + c, true);
    const optireduce_call_stats last = last_call(MPI_COMM_WORLD);
    MPITEST_CHECK(last.ok == 1 && last.collective == OPTIREDUCE_COLLECTIVE_REDUCE_SCATTER, "call %d: ok %d, collective %d",
                  c, last.ok, last.collective);
    bounded += last.kind == OPTIREDUCE_CALL_BOUNDED;
    dropped += last.dropped_entries;
    // Every entry is the sum of this rank's own value and some of the others' (a lost
    // contribution is left out, never rescaled); those that are not the full sum are counted.
    std::uint64_t wrong = 0;
    for (std::size_t i = 0; i < got.size(); ++i) {
      const auto at = begin + static_cast<std::int64_t>(i);
      double full = 0;
      for (int p = 0; p < ranks; ++p) full += input_of(p, at, 100 + c, true);
      if (got[i] == static_cast<float>(full)) continue;
      ++wrong;
      bool explained = false;
      for (unsigned subset = 0; subset < (1u << ranks) && !explained; ++subset) {
        if (!(subset >> rank & 1u)) continue;
        double partial = 0;
        for (int p = 0; p < ranks; ++p)
          if (subset >> p & 1u) partial += input_of(p, at, 100 + c, true);
        explained = got[i] == static_cast<float>(partial);
      }
      MPITEST_CHECK(explained, "call %d: element %zu is %.9g, no subset of the ranks' contributions sums to it", c, i,
                    static_cast<double>(got[i]));
    }
    MPITEST_CHECK(wrong <= last.dropped_entries, "call %d: %llu entries wrong, %llu counted as dropped", c,
                  static_cast<unsigned long long>(wrong), static_cast<unsigned long long>(last.dropped_entries));
  }
  // Calibration takes OPTIREDUCE_CALIBRATION_CALLS calls (the test sets 5); the loss budget of 1
  // keeps the rest bounded.
  MPITEST_CHECK(bounded >= kCalls - 6, "only %d of %d reduce-scatter calls ran bounded", bounded, kCalls);
  const optireduce_process_stats stats = process_stats();
  MPITEST_CHECK(stats.bounded_calls >= static_cast<std::uint64_t>(bounded), "bounded_calls %llu < %d",
                static_cast<unsigned long long>(stats.bounded_calls), bounded);
  if (rank == 0) std::printf("reduce_scatter_bounded: %d of %d calls bounded, %llu entries dropped on rank 0\n", bounded,
                             kCalls, static_cast<unsigned long long>(dropped));
  return kCalls;
}

}  // namespace mpitest
