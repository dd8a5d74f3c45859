// A handful of calls for tests whose subject is elsewhere (configuration, report, launch): three
// eligible sums and one ineligible (double) sum.
#include <vector>

#include "cases.hpp"
#include "harness.hpp"
#include "sum_checks.hpp"

namespace mpitest {

int case_smoke() {
  for (int salt = 0; salt < 3; ++salt) check_integer_sum({MPI_COMM_WORLD, "MPI_COMM_WORLD", 65537, salt == 1, MPI_FLOAT, salt});

  std::vector<double> send(1009, 1.5), got(send.size()), want(send.size());
  PMPI_Allreduce(send.data(), want.data(), 1009, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
  const StatsWindow window;
  MPI_Allreduce(send.data(), got.data(), 1009, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
  window.expect(0, 1, 0, "MPI_DOUBLE sum");
  MPITEST_CHECK(got == want, "MPI_DOUBLE sum differs from PMPI_Allreduce");
  return 4;
}

}  // namespace mpitest
