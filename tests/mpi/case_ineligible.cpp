// Calls the library must hand to PMPI_Allreduce untouched: the result is exactly PMPI's and the
// call counts as passthrough, never as intercepted.
#include <algorithm>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "cases.hpp"
#include "harness.hpp"

namespace mpitest {
namespace {

// Big enough to be eligible by size (OPTIREDUCE_MIN_BYTES), so only the property under test
// makes the call ineligible.
std::int64_t eligible_count() { return std::max<std::int64_t>(1009, static_cast<std::int64_t>(rule().min_bytes / 4) + 1); }

template <typename T>
std::vector<T> pattern(std::size_t n, int rank) {
  std::vector<T> v(n);
  for (std::size_t i = 0; i < n; ++i) v[i] = static_cast<T>(static_cast<int>((i * 31 + static_cast<std::size_t>(rank) * 7) % 201) - 100);
  return v;
}

// `count` elements of `type` live in `input` (several values per element for derived types).
// `same_everywhere` is false on intercommunicators, where each group gets the other's sum.
// Both calls must return the same code: on a communicator with MPI_ERRORS_RETURN an argument
// error of PMPI must reach the caller unchanged.
template <typename T>
void check_passthrough(const std::string& what, MPI_Comm comm, const std::vector<T>& input, int count, MPI_Datatype type,
                       MPI_Op op, bool in_place, bool same_everywhere = true) {
  std::vector<T> want(input.size());
  const int want_rc = PMPI_Allreduce(input.data(), want.data(), count, type, op, comm);
  std::vector<T> got = in_place ? input : std::vector<T>(input.size());
  const StatsWindow window;
  const int rc = MPI_Allreduce(in_place ? MPI_IN_PLACE : input.data(), got.data(), count, type, op, comm);
  window.expect(0, 1, 0, what);
  int rc_class = rc, want_class = want_rc;
  MPI_Error_class(rc, &rc_class);
  MPI_Error_class(want_rc, &want_class);
  MPITEST_CHECK(rc_class == want_class, "%s: MPI_Allreduce returned error class %d, PMPI_Allreduce %d", what.c_str(),
                rc_class, want_class);
  if (want_rc != MPI_SUCCESS) return;
  MPITEST_CHECK(std::memcmp(got.data(), want.data(), got.size() * sizeof(T)) == 0,
                "%s: the result differs from PMPI_Allreduce's", what.c_str());
  if (same_everywhere) expect_same_on_all_ranks(got.data(), got.size() * sizeof(T), comm, what);
}

void user_float_sum(void* in, void* inout, int* length, MPI_Datatype*) {
  const auto* a = static_cast<const float*>(in);
  auto* b = static_cast<float*>(inout);
  for (int i = 0; i < *length; ++i) b[i] += a[i];
}

}  // namespace

int case_ineligible() {
  const int rank = world_rank(), size = comm_size(MPI_COMM_WORLD);
  const auto n = static_cast<std::size_t>(eligible_count());
  const int count = static_cast<int>(n);
  int checked = 0;

  for (bool in_place : {false, true}) {
    const std::string where = in_place ? ", MPI_IN_PLACE" : "";
    check_passthrough("MPI_DOUBLE sum" + where, MPI_COMM_WORLD, pattern<double>(n, rank), count, MPI_DOUBLE, MPI_SUM, in_place);
    check_passthrough("MPI_FLOAT max" + where, MPI_COMM_WORLD, pattern<float>(n, rank), count, MPI_FLOAT, MPI_MAX, in_place);
    check_passthrough("MPI_INT sum" + where, MPI_COMM_WORLD, pattern<int>(n, rank), count, MPI_INT, MPI_SUM, in_place);
    checked += 3;
  }

  // A user-defined op that happens to sum floats is still not MPI_SUM.
  MPI_Op user_sum = MPI_OP_NULL;
  MPI_Op_create(&user_float_sum, 1, &user_sum);
  check_passthrough("user-defined float sum", MPI_COMM_WORLD, pattern<float>(n, rank), count, MPI_FLOAT, user_sum, false);
  MPI_Op_free(&user_sum);
  ++checked;

  // Four floats per element: the datatype is not MPI_FLOAT although its bytes are floats. With
  // a user op the call is valid everywhere; with MPI_SUM Open MPI rejects it (predefined ops
  // need predefined types), and that error must come back exactly as PMPI returns it.
  MPI_Datatype four_floats = MPI_DATATYPE_NULL;
  MPI_Type_contiguous(4, MPI_FLOAT, &four_floats);
  MPI_Type_commit(&four_floats);
  MPI_Op_create(&user_float_sum, 1, &user_sum);
  check_passthrough("MPI_Type_contiguous(4, MPI_FLOAT), user-defined sum", MPI_COMM_WORLD, pattern<float>(4 * n, rank),
                    count, four_floats, user_sum, false);
  MPI_Op_free(&user_sum);
  MPI_Comm errors_return = MPI_COMM_NULL;
  MPI_Comm_dup(MPI_COMM_WORLD, &errors_return);
  MPI_Comm_set_errhandler(errors_return, MPI_ERRORS_RETURN);
  check_passthrough("MPI_Type_contiguous(4, MPI_FLOAT), MPI_SUM", errors_return, pattern<float>(4 * n, rank), count,
                    four_floats, MPI_SUM, false);
  MPI_Comm_free(&errors_return);
  MPI_Type_free(&four_floats);
  checked += 2;

  if (size < 2) {
    if (rank == 0) std::printf("allreduce_check: intercommunicator skipped (needs 2 ranks, have %d)\n", size);
    return checked;
  }
  // Two halves of world joined by an intercommunicator: each group receives the other's sum.
  const int color = rank < size / 2 ? 0 : 1;
  MPI_Comm half = MPI_COMM_NULL, inter = MPI_COMM_NULL;
  MPI_Comm_split(MPI_COMM_WORLD, color, rank, &half);
  MPI_Intercomm_create(half, 0, MPI_COMM_WORLD, color == 0 ? size / 2 : 0, 77, &inter);
  check_passthrough("intercommunicator float sum", inter, pattern<float>(n, rank), count, MPI_FLOAT, MPI_SUM, false, false);
  MPI_Comm_free(&inter);
  MPI_Comm_free(&half);
  return checked + 1;
}

}  // namespace mpitest
