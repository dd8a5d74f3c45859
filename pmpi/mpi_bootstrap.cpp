#include "mpi_bootstrap.hpp"

#include <algorithm>

namespace optireduce::pmpi {

std::vector<std::vector<std::byte>> MpiBootstrap::allgather(std::span<const std::byte> mine) {
  int size = 0;
  PMPI_Comm_size(comm_, &size);
  int my_length = static_cast<int>(mine.size());
  std::vector<int> lengths(size), displs(size);
  PMPI_Allgather(&my_length, 1, MPI_INT, lengths.data(), 1, MPI_INT, comm_);
  int total = 0;
  for (int r = 0; r < size; ++r) {
    displs[r] = total;
    total += lengths[r];
  }
  std::vector<std::byte> all(static_cast<std::size_t>(total));
  PMPI_Allgatherv(mine.data(), my_length, MPI_BYTE, all.data(), lengths.data(), displs.data(), MPI_BYTE, comm_);
  std::vector<std::vector<std::byte>> out(size);
  for (int r = 0; r < size; ++r) out[r].assign(all.begin() + displs[r], all.begin() + displs[r] + lengths[r]);
  return out;
}

MpiBootstrap::~MpiBootstrap() {
  if (request_ != MPI_REQUEST_NULL) PMPI_Wait(&request_, MPI_STATUS_IGNORE);
}

void MpiBootstrap::start_allgather(std::span<const std::byte> mine) {
  if (request_ != MPI_REQUEST_NULL) PMPI_Wait(&request_, MPI_STATUS_IGNORE);
  int size = 0;
  PMPI_Comm_size(comm_, &size);
  send_.assign(mine.begin(), mine.end());
  receive_.assign(send_.size() * static_cast<std::size_t>(size), std::byte{0});
  PMPI_Iallgather(send_.data(), static_cast<int>(send_.size()), MPI_BYTE, receive_.data(), static_cast<int>(send_.size()),
                  MPI_BYTE, comm_, &request_);
}

std::vector<std::vector<std::byte>> MpiBootstrap::finish_allgather() {
  if (request_ != MPI_REQUEST_NULL) PMPI_Wait(&request_, MPI_STATUS_IGNORE);
  int size = 0;
  PMPI_Comm_size(comm_, &size);
  std::vector<std::vector<std::byte>> out(static_cast<std::size_t>(size));
  for (int r = 0; r < size; ++r)
    out[r].assign(receive_.begin() + static_cast<std::ptrdiff_t>(r * send_.size()),
                  receive_.begin() + static_cast<std::ptrdiff_t>((r + 1) * send_.size()));
  return out;
}

bool MpiBootstrap::allreduce_sum(const float* input, float* output, std::uint64_t count) {
  // MPI counts are int: large buffers go in pieces (every rank cuts them alike).
  constexpr std::uint64_t kPiece = 1u << 30;
  for (std::uint64_t at = 0; at < count; at += kPiece) {
    const int n = static_cast<int>(std::min(kPiece, count - at));
    const void* send = input == output ? MPI_IN_PLACE : static_cast<const void*>(input + at);
    if (PMPI_Allreduce(send, output + at, n, MPI_FLOAT, MPI_SUM, comm_) != MPI_SUCCESS) return false;
  }
  return true;
}

}  // namespace optireduce::pmpi
