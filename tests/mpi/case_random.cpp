// Non-integer data: the engine may sum in another order than PMPI, but every rank must hold the
// same bits.
#include "cases.hpp"
#include "communicators.hpp"
#include "harness.hpp"
#include "sum_checks.hpp"

namespace mpitest {

int case_random() {
  int checked = 0, salt = 100;
  auto comms = make_communicators();
  for (const NamedComm& nc : comms) {
    if (nc.comm == MPI_COMM_NULL) continue;
    for (std::int64_t count : {std::int64_t{3}, std::int64_t{1009}, std::int64_t{65537}, std::int64_t{300007}})
      for (bool in_place : {false, true}) {
        check_random_sum({nc.comm, nc.name, count, in_place, MPI_FLOAT, ++salt});
        ++checked;
      }
  }
  free_communicators(comms);
  return checked;
}

}  // namespace mpitest
