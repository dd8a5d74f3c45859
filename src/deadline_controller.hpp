// Deadlines of bounded calls, per size class (power-of-two byte ranges).
//
// Calibration: the first calls of a size class run exactly; their phase times give the bound tB
// (95th percentile). After that every rank stamps into its messages how long it estimates it
// would have needed to receive everything (elapsed / fraction received); the median of the stamps
// a rank saw in a call is that call's network estimate. The deadline follows the median of the
// recent estimates, times a margin: it shrinks when the network is quiet and grows when it is
// busy; a single spike does not move it (that is the tail we refuse to wait for), a lasting step
// does after a few calls. It never exceeds the hard cap and never drops below a floor tied to tB.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <map>
#include <vector>

namespace optireduce {

enum class TarPhase { scatter = 0, gather = 1 };
constexpr std::size_t kTarPhases = 2;

struct DeadlineOptions {
  unsigned calibration_calls = 20;
  double cap_us = 1e6;            // OPTIREDUCE_TIMEOUT_MS
  double margin = 2.0;            // deadline = margin * estimate
  double floor_fraction = 0.75;   // never below floor_fraction * tB
  // ...and never above ceiling_factor * tB: a phase's time includes how late the peers entered,
  // which includes their deadlines, so without a ceiling deadlines can feed on themselves. A
  // network that stays slower than that loses data, trips the loss budget, and the exact calls
  // that follow recalibrate tB.
  double ceiling_factor = 4.0;
  std::size_t window = 9;         // calls whose estimates the median runs over
};

struct PhaseDeadlines {
  std::array<double, kTarPhases> us{};  // budget of each phase, microseconds
};

// Size class of a call: floor(log2(bytes)), so 1 MiB and 1.9 MiB share one.
unsigned size_class(std::uint64_t bytes);

class DeadlineController {
 public:
  explicit DeadlineController(const DeadlineOptions& options) : options_(options) {}

  // True while calls of this size class must still run exactly (calibration).
  bool calibrating(unsigned size_class) const;
  // Phase times of an exact call: calibration, or (once calibrated) recalibration from the exact
  // calls that follow a loss-budget fallback. True when this call completed a (re)calibration:
  // the bounds are new, and the caller may agree them with the other ranks (set_bounds).
  bool record_calibration(unsigned size_class, const std::array<double, kTarPhases>& phase_us);
  // Replaces the calibrated bounds tB of a class (the ones every rank agreed on; capped).
  void set_bounds(unsigned size_class, const std::array<double, kTarPhases>& bound_us);

  // Feed the median of the stamps this rank saw in a bounded call, per phase (0: none seen).
  void record_estimate(unsigned size_class, const std::array<double, kTarPhases>& estimate_us);

  PhaseDeadlines deadlines(unsigned size_class) const;
  // The calibrated bound tB of a phase (0 while calibrating).
  double bound_us(unsigned size_class, TarPhase phase) const;

 private:
  struct ClassState {
    std::array<std::vector<double>, kTarPhases> calibration;
    std::array<double, kTarPhases> bound{};  // tB per phase
    std::array<std::deque<double>, kTarPhases> recent;
    bool calibrated = false;
  };
  DeadlineOptions options_;
  std::map<unsigned, ClassState> classes_;
};

}  // namespace optireduce
