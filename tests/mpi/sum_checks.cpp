#include "sum_checks.hpp"

#include <cfloat>
#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include "harness.hpp"

namespace mpitest {
namespace {

// Runs the call under test between stats reads; in place reduces `result` itself.
void run_allreduce(const SumCase& c, const std::vector<float>& send, std::vector<float>& result) {
  const bool engine = must_intercept(c.count, c.comm);
  const StatsWindow window;
  const int rc = MPI_Allreduce(c.in_place ? MPI_IN_PLACE : send.data(), result.data(), static_cast<int>(c.count), c.type,
                               MPI_SUM, c.comm);
  if (c.count_stats)
    window.expect(engine ? 1 : 0, engine ? 0 : 1, engine ? static_cast<std::uint64_t>(c.count) * sizeof(float) : 0,
                  describe(c));
  MPITEST_CHECK(rc == MPI_SUCCESS, "%s: MPI_Allreduce returned %d", describe(c).c_str(), rc);
}

}  // namespace

std::string describe(const SumCase& c) {
  char type[MPI_MAX_OBJECT_NAME] = {};
  int length = 0;
  MPI_Type_get_name(c.type, type, &length);
  return c.name + " (" + std::to_string(comm_size(c.comm)) + " ranks), " + type + " count " + std::to_string(c.count) +
         (c.in_place ? ", MPI_IN_PLACE" : "");
}

void check_integer_sum(const SumCase& c) {
  const std::vector<float> input = integer_pattern(c.count, comm_rank(c.comm), c.salt);
  std::vector<float> want(input.size());
  PMPI_Allreduce(input.data(), want.data(), static_cast<int>(c.count), c.type, MPI_SUM, c.comm);

  std::vector<float> send = input;
  // NaN marks entries the call never wrote.
  std::vector<float> got = c.in_place ? input : std::vector<float>(input.size(), std::numeric_limits<float>::quiet_NaN());
  run_allreduce(c, send, got);

  expect_bitwise_equal(got, want, describe(c));
  if (!c.in_place) expect_bitwise_equal(send, input, describe(c) + ": the send buffer changed");
  expect_same_on_all_ranks(got.data(), got.size() * sizeof(float), c.comm, describe(c));
}

void check_random_sum(const SumCase& c) {
  std::mt19937 generator(static_cast<unsigned>(c.salt * 1000003 + comm_rank(c.comm)));
  std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
  std::vector<float> input(static_cast<std::size_t>(c.count)), magnitude(input.size());
  for (std::size_t i = 0; i < input.size(); ++i) {
    // Magnitudes from 1e-3 to 1e3, like gradients of different layers.
    input[i] = uniform(generator) * std::pow(10.0f, static_cast<float>(static_cast<int>(i % 7) - 3));
    magnitude[i] = std::fabs(input[i]);
  }
  std::vector<float> want(input.size()), scale(input.size());
  PMPI_Allreduce(input.data(), want.data(), static_cast<int>(c.count), c.type, MPI_SUM, c.comm);
  PMPI_Allreduce(magnitude.data(), scale.data(), static_cast<int>(c.count), c.type, MPI_SUM, c.comm);

  std::vector<float> send = input;
  std::vector<float> got = c.in_place ? input : std::vector<float>(input.size(), std::numeric_limits<float>::quiet_NaN());
  run_allreduce(c, send, got);

  for (std::size_t i = 0; i < got.size(); ++i) {
    const double error = std::fabs(static_cast<double>(got[i]) - want[i]);
    MPITEST_CHECK(error <= 1e-5 * scale[i] + FLT_MIN, "%s: element %zu is %.9g, PMPI_Allreduce gives %.9g (sum of |x| %.9g)",
                  describe(c).c_str(), i, static_cast<double>(got[i]), static_cast<double>(want[i]),
                  static_cast<double>(scale[i]));
  }
  if (!c.in_place) expect_bitwise_equal(send, input, describe(c) + ": the send buffer changed");
  expect_same_on_all_ranks(got.data(), got.size() * sizeof(float), c.comm, describe(c));
}

}  // namespace mpitest
