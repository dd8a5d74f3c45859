// Decisions that change which collective runs must come out the same on every rank, so they are
// taken from figures every rank has: small all-gathers over the bootstrap (the job's own MPI) at
// the same call on every rank. Two live here: the loss budget (fallback to exact calls, the
// automatic Hadamard transform, the divergence count) and the calibrated deadline bounds. The
// third, which all-gather chunks every rank fills, is tar/fill_agreement.hpp.
#pragma once

#include <cstdint>

#include "optireduce/engine/engine/bootstrap.hpp"
#include "optireduce/engine/report/call_stats.hpp"
#include "optireduce/engine/config/engine_options.hpp"

namespace optireduce {

class LossBudgetAgreement {
 public:
  LossBudgetAgreement(const EngineOptions& options, int rank) : options_(options), rank_(rank) {}

  // After every bounded call. Every sync_interval calls it starts an all-gather of the window's
  // figures and finishes the one started a window earlier, so a late rank holds the others only
  // if it is a whole window behind; the decisions apply from the call that finishes it, on every
  // rank alike. `calls` is the communicator's call count.
  void after_bounded_call(const CallStats& call, std::uint64_t calls, Bootstrap& bootstrap, AgreedCounts& agreed);

  // Calls up to this sequence number run exactly (the last agreed window was over budget).
  bool exact_until(std::uint64_t sequence) const { return sequence <= reliable_until_; }
  // Automatic Hadamard: on while the last agreed window lost anything anywhere.
  bool hadamard_active() const { return hadamard_active_; }

 private:
  // One rank's window: its figures, then the fill hash of each of its calls. Calls whose hashes
  // differ between ranks left replicas different: that is the divergence count, measured.
  struct Figures {
    std::uint64_t entries, dropped;
    double worst_call_loss;
  };
  std::vector<std::byte> window_blob() const;
  void decide(const std::vector<std::vector<std::byte>>& all, std::uint64_t calls, AgreedCounts& agreed);

  const EngineOptions& options_;
  int rank_;
  std::uint64_t reliable_until_ = 0;
  unsigned calls_in_window_ = 0;
  bool pending_ = false;  // an all-gather was started and not yet finished
  bool hadamard_active_ = false;
  Figures window_{};
  std::vector<std::uint64_t> fill_hashes_;
};

// At the call that completes a (re)calibration of a size class (the same call on every rank:
// calibration counts and fallbacks are agreed), every rank takes the largest of all ranks' bounds.
void agree_calibrated_bounds(DeadlineController& deadlines, unsigned size_class, Bootstrap& bootstrap);

}  // namespace optireduce
