#include "communicators.hpp"

#include "harness.hpp"

namespace mpitest {

std::vector<NamedComm> make_communicators() {
  const int rank = world_rank(), size = comm_size(MPI_COMM_WORLD);
  std::vector<NamedComm> out;
  out.push_back({"MPI_COMM_WORLD", MPI_COMM_WORLD, false});

  NamedComm dup{"dup of world", MPI_COMM_NULL, true};
  MPI_Comm_dup(MPI_COMM_WORLD, &dup.comm);
  out.push_back(dup);

  // Descending key: the split's rank 0 is the highest world rank, so shard ownership differs
  // from world's.
  NamedComm split{"split", MPI_COMM_NULL, true};
  MPI_Comm_split(MPI_COMM_WORLD, size >= 4 ? rank % 2 : 0, size - rank, &split.comm);
  out.push_back(split);

  MPI_Group world_group = MPI_GROUP_NULL, group = MPI_GROUP_NULL;
  MPI_Comm_group(MPI_COMM_WORLD, &world_group);
  std::vector<int> members;
  for (int r = size - 1; r >= (size >= 3 ? 1 : 0); --r) members.push_back(r);
  MPI_Group_incl(world_group, static_cast<int>(members.size()), members.data(), &group);
  NamedComm created{"MPI_Comm_create on a reversed group", MPI_COMM_NULL, true};
  MPI_Comm_create(MPI_COMM_WORLD, group, &created.comm);
  MPI_Group_free(&group);
  MPI_Group_free(&world_group);
  out.push_back(created);

  out.push_back({"MPI_COMM_SELF", MPI_COMM_SELF, false});
  NamedComm single{"split of size 1", MPI_COMM_NULL, true};
  MPI_Comm_split(MPI_COMM_WORLD, rank, 0, &single.comm);
  out.push_back(single);
  return out;
}

void free_communicators(std::vector<NamedComm>& comms) {
  for (auto& c : comms)
    if (c.owned && c.comm != MPI_COMM_NULL) MPI_Comm_free(&c.comm);
  comms.clear();
}

}  // namespace mpitest
