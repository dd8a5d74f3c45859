// The communicators every correctness case runs on: the library keeps one engine per
// communicator and must map each one's ranks correctly, so world alone proves little.
#pragma once

#include <mpi.h>

#include <string>
#include <vector>

namespace mpitest {

struct NamedComm {
  std::string name;
  MPI_Comm comm = MPI_COMM_NULL;  // MPI_COMM_NULL on ranks that are not members
  bool owned = false;             // freed by free_communicators
};

// world; a dup of world; a split (two halves from 4 ranks, else all ranks) ordered by descending
// world rank; MPI_Comm_create on a reversed group (without world rank 0 from 3 ranks); and two
// size-1 communicators (MPI_COMM_SELF and a split with one rank per colour). Collective on world.
std::vector<NamedComm> make_communicators();
void free_communicators(std::vector<NamedComm>& comms);

}  // namespace mpitest
