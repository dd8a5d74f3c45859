// What the engine needs from the job's own communication layer: an all-gather of small blobs over
// the ranks of its communicator (to start, and for its agreement rounds), and an exact sum for
// the calls a transport that may lose data must not run (calibration, reliable mode). pmpi/
// implements it with PMPI_Allgather(v) and PMPI_Allreduce; unit tests implement it in-process.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

namespace optireduce {

class Bootstrap {
 public:
  virtual ~Bootstrap() = default;
  // Collective: every rank passes its blob and gets everybody's, indexed by rank.
  virtual std::vector<std::vector<std::byte>> allgather(std::span<const std::byte> mine) = 0;

  // The same in two halves, so a rank that is late does not hold the others: start it (every
  // rank at the same point, blobs of one size on every rank), finish it later. One at a time.
  // The default runs the whole all-gather when it is finished.
  virtual void start_allgather(std::span<const std::byte> mine) { pending_.assign(mine.begin(), mine.end()); }
  virtual std::vector<std::vector<std::byte>> finish_allgather() { return allgather(pending_); }

  // Collective: output = sum over ranks of input, exactly (input may equal output). False when
  // it failed.
  virtual bool allreduce_sum(const float* input, float* output, std::uint64_t count) = 0;

  // Collective: the ranks that pass the same color >= 0 form a group of their own, ordered by
  // key (a sub-engine's bootstrap: hierarchy/host_tiers.hpp); `out` is this rank's view of it
  // (null for color < 0). False where the front end cannot split or the split failed.
  virtual bool split(int color, int key, std::unique_ptr<Bootstrap>& out) {
    (void)color, (void)key;
    out.reset();
    return false;
  }

 private:
  std::vector<std::byte> pending_;
};

}  // namespace optireduce
