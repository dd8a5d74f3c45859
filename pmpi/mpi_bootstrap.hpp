// Bootstrap over a communicator with PMPI_Allgather(v); only used inside a collective call.
#pragma once

#include <mpi.h>

#include "bootstrap.hpp"

namespace optireduce::pmpi {

class MpiBootstrap final : public Bootstrap {
 public:
  explicit MpiBootstrap(MPI_Comm comm) : comm_(comm) {}
  std::vector<std::vector<std::byte>> allgather(std::span<const std::byte> mine) override;

 private:
  MPI_Comm comm_;
};

}  // namespace optireduce::pmpi
