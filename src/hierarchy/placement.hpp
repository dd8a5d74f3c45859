// Where a communicator's ranks run: the host of every rank, as the engine learns it at creation
// (every rank sends its host name to all), numbered alike on every rank.
#pragma once

#include <string>
#include <vector>

namespace optireduce {

struct Placement {
  // Hosts are numbered by their lowest rank, so every rank numbers them alike.
  std::vector<int> host_of_rank;
  std::vector<std::vector<int>> ranks_of_host;  // each in rank order
  std::vector<std::string> host_names;          // by host number

  int ranks() const { return static_cast<int>(host_of_rank.size()); }
  int hosts() const { return static_cast<int>(ranks_of_host.size()); }
  int ranks_on(int host) const { return static_cast<int>(ranks_of_host[host].size()); }
  // Position of a rank among the ranks of its host.
  int local_index(int rank) const;
  // "3+2+2": the ranks on each host, by host number.
  std::string counts_text() const;
};

// From the host name of every rank, in rank order.
Placement placement_from_names(const std::vector<std::string>& names);

// Hosts filled in order (what `mpirun --map-by slot` does): {3, 2} puts ranks 0-2 on host h0 and
// 3-4 on h1. Counts must be positive.
Placement placement_from_counts(const std::vector<int>& ranks_per_host);

}  // namespace optireduce
