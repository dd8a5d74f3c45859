// What the engine needs from the job's launcher to get started: an all-gather of small blobs
// over the ranks of its communicator. pmpi/ implements it with PMPI_Allgather(v); unit tests
// implement it in-process.
#pragma once

#include <cstddef>
#include <span>
#include <vector>

namespace optireduce {

class Bootstrap {
 public:
  virtual ~Bootstrap() = default;
  // Collective: every rank passes its blob and gets everybody's, indexed by rank.
  virtual std::vector<std::vector<std::byte>> allgather(std::span<const std::byte> mine) = 0;
};

}  // namespace optireduce
