// MPI_Reduce_scatter_block and MPI_Reduce_scatter through the engine's reduce-scatter: the
// scatter-reduce phase of the Transpose AllReduce alone, rank r's block the shard it owns (the
// shards follow the counts). Shared by the C and Fortran entry points.
#pragma once

#include <mpi.h>

#include <cstdint>
#include <optional>

#include "allreduce.hpp"

namespace optireduce::pmpi {

// Rank p's block: the block form's one count for every rank, or recvcounts[p] (int, MPI_Fint or
// MPI_Count). MPI requires them to be the same on every rank, so a decision from them is agreed.
class BlockCounts {
 public:
  static BlockCounts every(std::int64_t count) { return BlockCounts(count, nullptr, nullptr); }
  template <typename Int>
  static BlockCounts per_rank(const Int* counts) {
    return BlockCounts(0, counts, [](const void* c, int p) { return static_cast<std::int64_t>(static_cast<const Int*>(c)[p]); });
  }
  // False for a per-rank form given no array.
  bool present() const { return !read_ || counts_; }
  std::int64_t of(int p) const { return read_ ? read_(counts_, p) : each_; }

 private:
  using Read = std::int64_t (*)(const void*, int);
  BlockCounts(std::int64_t each, const void* counts, Read read) : each_(each), counts_(counts), read_(read) {}
  std::int64_t each_;
  const void* counts_;
  Read read_;
};

// Runs an eligible reduce-scatter through the communicator's engine, setting *result to the MPI
// return code; or returns why it goes to the MPI untouched (a datatype or op that is not a sum the
// engine takes, as for the allreduce: sum_format.hpp; an intercommunicator or a single rank, arguments the MPI rejects, below
// OPTIREDUCE_MIN_BYTES in all, mode off, no engine, a failed engine, a device buffer), the same on
// every rank. `name`: the MPI function, for messages.
std::optional<PassReason> try_reduce_scatter(const char* name, const void* sendbuf, void* recvbuf, const BlockCounts& counts,
                                             MPI_Datatype datatype, MPI_Op op, MPI_Comm comm, int* result);

}  // namespace optireduce::pmpi
