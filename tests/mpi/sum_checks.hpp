// One float sum run through MPI_Allreduce (so through the library when preloaded) and checked
// against PMPI_Allreduce, the MPI's own result, on the same inputs.
#pragma once

#include <mpi.h>

#include <cstdint>
#include <string>

namespace mpitest {

struct SumCase {
  MPI_Comm comm = MPI_COMM_WORLD;
  std::string name;                  // the communicator, for messages
  std::int64_t count = 0;
  bool in_place = false;
  MPI_Datatype type = MPI_FLOAT;     // MPI_FLOAT, or MPI_REAL / MPI_REAL4 (also 4-byte floats)
  int salt = 0;                      // varies the data between calls
  bool count_stats = true;           // false when other threads run calls at the same time
};

// Integer-valued data: the result must equal PMPI's bit for bit, be identical on every rank,
// leave a separate send buffer untouched, and be intercepted exactly when eligible.
void check_integer_sum(const SumCase& c);

// Random non-integer data: identical on every rank, within 1e-5 of PMPI relative to the sum of
// magnitudes (summation order may differ from PMPI's), intercepted exactly when eligible.
void check_random_sum(const SumCase& c);

std::string describe(const SumCase& c);

}  // namespace mpitest
