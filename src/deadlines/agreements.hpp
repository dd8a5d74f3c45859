// Decisions that change which collective runs must come out the same on every rank, so they are
// taken from figures every rank has, at the same call on every rank. Two live here: the loss
// budget (fallback to exact calls, the automatic Hadamard transform, the divergence count), whose
// figures ride on the lists that end a bounded call over datagrams (or go over the bootstrap, the
// job's own MPI, where no such list runs), and the calibrated deadline bounds (an all-gather over
// the bootstrap). The third, which all-gather chunks every rank fills, is tar/fill_agreement.hpp.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "optireduce/engine/engine/bootstrap.hpp"
#include "optireduce/engine/report/call_stats.hpp"
#include "optireduce/engine/config/engine_options.hpp"

namespace optireduce {

class LossBudgetAgreement {
 public:
  // `bounded_reliable`: whether the transport of the engine's bounded calls is reliable; with the
  // options and the rank count it decides, once per engine, whether those calls end in lists
  // (lists_carry_, below).
  LossBudgetAgreement(const EngineOptions& options, int rank, int ranks, bool bounded_reliable)
      : options_(options), rank_(rank), lists_carry_(ranks > 1 && !bounded_reliable && options.fill_agreed()) {}

  // What the lists of the coming bounded call carry where it ends in such an exchange: at the
  // call that closes a window, the figures of the window before; empty otherwise (and always
  // where bounded calls end in no lists: nothing waits for them then).
  std::span<const std::byte> figures_for_lists() const {
    if (calls_in_window_ + 1 < options_.sync_interval) return {};
    return unsent_;
  }

  // After every bounded call. Every sync_interval calls (a window, counted alike on every rank)
  // the window's figures are sealed; every rank gets every rank's at the call that closes the next
  // window, and the decisions apply from that call on, on every rank alike. Where bounded calls
  // end in lists (lists_carry_), the figures ride on that call's lists: `carried` holds every
  // rank's where they did (call/fill.cpp), empty otherwise. Where that call had no lists (a
  // reduce-scatter), they go over the bootstrap from it, finished a window later; where bounded
  // calls never end in lists, over the bootstrap from the call that seals them (an all-gather
  // started there and finished a window later: a late rank holds the others only when it is a
  // whole window behind). `calls` is the communicator's call count.
  void after_bounded_call(const CallStats& call, std::uint64_t calls, std::span<const std::vector<std::byte>> carried,
                          Bootstrap& bootstrap, AgreedCounts& agreed);

  // Calls up to this sequence number run exactly (the last agreed window was over budget).
  bool exact_until(std::uint64_t sequence) const { return sequence <= reliable_until_; }
  // Automatic Hadamard: on while the last agreed window lost anything anywhere.
  bool hadamard_active() const { return hadamard_active_; }

 private:
  // One rank's window: its figures, then the fill hash of each of its calls (little-endian, the
  // loss as its double's bits). Calls whose hashes differ between ranks left replicas different:
  // that is the divergence count, measured.
  struct Figures {
    std::uint64_t entries, dropped;
    double worst_call_loss;
  };
  static constexpr std::size_t kFiguresBytes = 3 * sizeof(std::uint64_t);
  std::vector<std::byte> window_blob() const;
  void decide(std::span<const std::vector<std::byte>> all, std::uint64_t calls, AgreedCounts& agreed);

  const EngineOptions& options_;
  int rank_;
  // Whether bounded allreduces end in the exchange of lists that every rank completes or fails
  // alike (call/list_exchange.cpp): over datagrams, the fill agreed.
  const bool lists_carry_;
  std::uint64_t reliable_until_ = 0;
  unsigned calls_in_window_ = 0;
  bool pending_ = false;  // an all-gather was started and not yet finished
  // Sealed figures that wait for the lists of the next window's last call; empty when none wait
  // (a sealed window's blob never is: it holds its figures).
  std::vector<std::byte> unsent_;
  bool hadamard_active_ = false;
  Figures window_{};
  std::vector<std::uint64_t> fill_hashes_;
};

// At the call that completes a (re)calibration of a size class (the same call on every rank:
// calibration counts and fallbacks are agreed), every rank takes the largest of all ranks' bounds.
void agree_calibrated_bounds(DeadlineController& deadlines, unsigned size_class, Bootstrap& bootstrap);

}  // namespace optireduce
