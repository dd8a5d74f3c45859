// 16-bit sums as jobs make them: elements of MPI_Type_contiguous(2, MPI_BYTE) reduced with an op of
// MPI_Op_create whose function sums fp16 (Horovod's recipe) or bf16, by MPI_Allreduce and by
// MPI_Reduce_scatter. The library must recognise
// them and run the engine; the values are checked against a float64 reference (error no worse
// than a float32-accumulated sum in rank order rounded once) and must be bitwise the same on every
// rank. Ops it must not recognise (a max, a sum declared non-commutative, an op made behind its
// back with PMPI_Op_create, ops that differ between ranks) go to the MPI, counted by reason (the
// ctest checks the report's reasons).
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "cases.hpp"
#include "half_ops.hpp"
#include "harness.hpp"

namespace mpitest {
namespace {

void float16_max(void* in, void* inout, int* len, MPI_Datatype*) {
  const auto* a = static_cast<const std::uint16_t*>(in);
  auto* b = static_cast<std::uint16_t*>(inout);
  for (int i = 0; i < *len; ++i)
    b[i] = narrow(Half::float16, std::fmax(widen(Half::float16, a[i]), widen(Half::float16, b[i])));
}

// Rank r's element i: a value of the format of magnitude 2^-4 .. 2^4, mixed signs.
std::uint16_t element(Half f, int rank, std::size_t i, int salt) {
  std::uint32_t h = static_cast<std::uint32_t>(i) * 2654435761u ^ static_cast<std::uint32_t>(rank * 40503 + salt * 977);
  h ^= h >> 15;
  h *= 2246822519u;
  h ^= h >> 13;
  const float magnitude = std::ldexp(1.0f + static_cast<float>(h & 0xFFFF) / 65536.0f, static_cast<int>((h >> 16) % 9) - 4);
  return narrow(f, (h >> 31) ? -magnitude : magnitude);
}

std::vector<std::uint16_t> contribution(Half f, int rank, std::size_t n, int salt) {
  std::vector<std::uint16_t> v(n);
  for (std::size_t i = 0; i < n; ++i) v[i] = element(f, rank, i, salt);
  return v;
}

// Every element: |got - exact| <= |float32 rank-order sum rounded once - exact|. got[i] is element
// first + i of the sum (a reduce-scatter's block starts at its offset).
void expect_accurate(Half f, const std::vector<std::uint16_t>& got, int ranks, int salt, const std::string& what,
                     std::size_t first = 0) {
  for (std::size_t i = 0; i < got.size(); ++i) {
    double exact = 0;
    float running = 0;
    for (int r = 0; r < ranks; ++r) {
      exact += widen(f, element(f, r, first + i, salt));
      running += widen(f, element(f, r, first + i, salt));
    }
    const double bound = std::fabs(static_cast<double>(widen(f, narrow(f, running))) - exact);
    const double error = std::fabs(static_cast<double>(widen(f, got[i])) - exact);
    MPITEST_CHECK(error <= bound, "%s: element %zu is %g, the float64 sum %.9g: error %g beyond %g", what.c_str(), i,
                  static_cast<double>(widen(f, got[i])), exact, error, bound);
  }
}

// One call through the engine: intercepted, accurate, the same bits everywhere.
void check_served(Half f, MPI_Comm comm, MPI_Datatype type, MPI_Op op, std::size_t n, bool in_place, int salt) {
  const std::string what = std::string(name(f)) + " sum of " + std::to_string(n) + (in_place ? ", in place" : "");
  const std::vector<std::uint16_t> mine = contribution(f, comm_rank(comm), n, salt);
  std::vector<std::uint16_t> got = in_place ? mine : std::vector<std::uint16_t>(n, 0xFFFF);
  const StatsWindow window;
  MPITEST_CHECK(MPI_Allreduce(in_place ? MPI_IN_PLACE : mine.data(), got.data(), static_cast<int>(n), type, op, comm) ==
                    MPI_SUCCESS, "%s: MPI_Allreduce failed", what.c_str());
  window.expect(1, 0, 2 * n, what);
  if (!in_place)
    MPITEST_CHECK(mine == contribution(f, comm_rank(comm), n, salt), "%s: the send buffer changed", what.c_str());
  expect_accurate(f, got, comm_size(comm), salt, what);
  expect_same_on_all_ranks(got.data(), 2 * n, comm, what);
}

// One MPI_Reduce_scatter through the engine, blocks of `counts` (a zero among them): this rank's
// block accurate, counted as a reduce-scatter of its format.
void check_scattered(Half f, MPI_Datatype type, MPI_Op op, const std::vector<int>& counts, bool in_place, int salt) {
  const int rank = world_rank();
  std::size_t total = 0, first = 0;
  for (int p = 0; p < static_cast<int>(counts.size()); ++p) (p < rank ? first : total) += static_cast<std::size_t>(counts[p]);
  total += first;
  const std::string what = std::string(name(f)) + " reduce-scatter of " + std::to_string(total) + (in_place ? ", in place" : "");
  std::vector<std::uint16_t> mine = contribution(f, rank, total, salt), got(static_cast<std::size_t>(counts[rank]), 0xFFFF);
  const auto scattered = [f] {
    return process_stats().intercepted_by_operation[OPTIREDUCE_COLLECTIVE_REDUCE_SCATTER]
                                                   [f == Half::float16 ? OPTIREDUCE_FORMAT_FLOAT16 : OPTIREDUCE_FORMAT_BFLOAT16];
  };
  const std::uint64_t before = scattered();
  const StatsWindow window;
  MPITEST_CHECK(MPI_Reduce_scatter(in_place ? MPI_IN_PLACE : mine.data(), in_place ? mine.data() : got.data(), counts.data(),
                                   type, op, MPI_COMM_WORLD) == MPI_SUCCESS, "%s: MPI_Reduce_scatter failed", what.c_str());
  window.expect(1, 0, 2 * total, what);
  MPITEST_CHECK(scattered() == before + 1, "%s: not counted as a reduce-scatter of its format", what.c_str());
  if (in_place) got.assign(mine.begin(), mine.begin() + counts[rank]);
  expect_accurate(f, got, comm_size(MPI_COMM_WORLD), salt, what, first);
}

// One call the library must leave to the MPI: counted as passed through, PMPI's result exactly.
void check_passed(const std::string& what, MPI_Comm comm, MPI_Datatype type, MPI_Op op, std::size_t n, bool compare) {
  const std::vector<std::uint16_t> mine = contribution(Half::float16, comm_rank(comm), n, 7);
  std::vector<std::uint16_t> got(n), want(n);
  PMPI_Allreduce(mine.data(), want.data(), static_cast<int>(n), type, op, comm);
  const StatsWindow window;
  MPI_Allreduce(mine.data(), got.data(), static_cast<int>(n), type, op, comm);
  window.expect(0, 1, 0, what);
  if (compare) MPITEST_CHECK(got == want, "%s: the result differs from PMPI_Allreduce's", what.c_str());
}

}  // namespace

int case_half() {
  const int rank = world_rank(), size = comm_size(MPI_COMM_WORLD);
  MPI_Datatype two_bytes = MPI_DATATYPE_NULL, one_short = MPI_DATATYPE_NULL;
  MPI_Type_contiguous(2, MPI_BYTE, &two_bytes);
  MPI_Type_commit(&two_bytes);
  MPI_Type_contiguous(1, MPI_UINT16_T, &one_short);
  MPI_Type_commit(&one_short);
  MPI_Op fp16_sum = MPI_OP_NULL, bf16_sum = MPI_OP_NULL;
  MPI_Op_create(&half_sum<Half::float16>, 1, &fp16_sum);
  MPI_Op_create(&half_sum<Half::bfloat16>, 1, &bf16_sum);
  int checked = 0;
  if (size < 2) {
    check_passed("fp16 sum on one rank", MPI_COMM_WORLD, two_bytes, fp16_sum, 1001, true);
    ++checked;
  } else {
    // Odd counts, several calls per op (the verdict is cached after the first), both carriers.
    for (std::size_t n : {std::size_t{1}, std::size_t{4099}, std::size_t{262147}}) {
      for (bool in_place : {false, true}) {
        check_served(Half::float16, MPI_COMM_WORLD, two_bytes, fp16_sum, n, in_place, checked);
        check_served(Half::bfloat16, MPI_COMM_WORLD, one_short, bf16_sum, n, in_place, checked);
        checked += 2;
      }
    }
    // A communicator of its own agrees on the op again: half of world, then the odd ranks.
    MPI_Comm half = MPI_COMM_NULL;
    MPI_Comm_split(MPI_COMM_WORLD, rank % 2, rank, &half);
    if (comm_size(half) >= 2) {
      check_served(Half::float16, half, two_bytes, fp16_sum, 65537, false, 3);
      check_served(Half::bfloat16, half, two_bytes, bf16_sum, 65537, true, 4);
    } else {
      check_passed("fp16 sum on a communicator of one rank", half, two_bytes, fp16_sum, 4099, true);
    }
    MPI_Comm_free(&half);
    checked += 2;
    // Reduce-scatters of the same sums, the shards following uneven counts with a zero.
    std::vector<int> counts(static_cast<std::size_t>(size));
    for (int p = 0; p < size; ++p) counts[static_cast<std::size_t>(p)] = p == 1 ? 0 : 30011 + 1000 * p;
    check_scattered(Half::float16, two_bytes, fp16_sum, counts, false, 5);
    check_scattered(Half::bfloat16, one_short, bf16_sum, counts, true, 6);
    checked += 2;

    // Not recognised: each one counted under its reason in the report (ctest checks them).
    MPI_Op max = MPI_OP_NULL, ordered_sum = MPI_OP_NULL, unseen = MPI_OP_NULL, mixed = MPI_OP_NULL;
    MPI_Op_create(&float16_max, 1, &max);
    MPI_Op_create(&half_sum<Half::float16>, 0, &ordered_sum);
    PMPI_Op_create(&half_sum<Half::float16>, 1, &unseen);
    // Rank 0's op sums fp16, the others' bf16: the ranks' probes differ (an erroneous program, whose
    // result is whatever the MPI makes of it).
    MPI_Op_create(rank == 0 ? &half_sum<Half::float16> : &half_sum<Half::bfloat16>, 1, &mixed);
    for (int repeat = 0; repeat < 2; ++repeat) {
      check_passed("fp16 max (user_op_not_sum)", MPI_COMM_WORLD, two_bytes, max, 4099, true);
      check_passed("fp16 sum declared non-commutative (user_op_not_sum)", MPI_COMM_WORLD, two_bytes, ordered_sum, 4099,
                   true);
      check_passed("op made with PMPI_Op_create (user_op_unknown)", MPI_COMM_WORLD, two_bytes, unseen, 4099, true);
      check_passed("ops that differ between ranks (user_op_disagreement)", MPI_COMM_WORLD, two_bytes, mixed, 4099,
                   false);
      checked += 4;
    }
    // A 2-byte integer with MPI_SUM is an integer sum: the MPI's.
    check_passed("MPI_UINT16_T sum (datatype)", MPI_COMM_WORLD, MPI_UINT16_T, MPI_SUM, 4099, true);
    ++checked;
    for (MPI_Op* op : {&max, &ordered_sum, &mixed}) MPI_Op_free(op);
    PMPI_Op_free(&unseen);
  }
  MPI_Op_free(&fp16_sum);
  MPI_Op_free(&bf16_sum);
  MPI_Type_free(&two_bytes);
  MPI_Type_free(&one_short);
  if (rank == 0) std::printf("allreduce_check: half: %d calls on %d ranks\n", checked, size);
  return checked;
}

}  // namespace mpitest
