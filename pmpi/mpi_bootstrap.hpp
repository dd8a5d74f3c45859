// Bootstrap over a communicator with PMPI_Allgather(v) and PMPI_Allreduce; only used inside a
// collective call.
#pragma once

#include <mpi.h>

#include "optireduce/engine/engine/bootstrap.hpp"

namespace optireduce::pmpi {

class MpiBootstrap final : public Bootstrap {
 public:
  explicit MpiBootstrap(MPI_Comm comm) : comm_(comm) {}
  // Completes an all-gather still in flight: every rank started it, so it finishes.
  ~MpiBootstrap() override;
  std::vector<std::vector<std::byte>> allgather(std::span<const std::byte> mine) override;
  void start_allgather(std::span<const std::byte> mine) override;
  std::vector<std::vector<std::byte>> finish_allgather() override;
  bool allreduce_sum(const float* input, float* output, std::uint64_t count) override;

 private:
  MPI_Comm comm_;
  MPI_Request request_ = MPI_REQUEST_NULL;
  std::vector<std::byte> send_, receive_;
};

}  // namespace optireduce::pmpi
