#include "deadline_controller.hpp"

#include <algorithm>
#include <bit>

#include "stats.hpp"

namespace optireduce {

unsigned size_class(std::uint64_t bytes) { return bytes ? static_cast<unsigned>(std::bit_width(bytes) - 1) : 0; }

bool DeadlineController::calibrating(unsigned cls) const {
  auto it = classes_.find(cls);
  return it == classes_.end() || !it->second.calibrated;
}

bool DeadlineController::record_calibration(unsigned cls, const std::array<double, kTarPhases>& phase_us) {
  ClassState& s = classes_[cls];
  for (std::size_t p = 0; p < kTarPhases; ++p) s.calibration[p].push_back(phase_us[p]);
  // A recalibration needs fewer calls than the first calibration: the engine is warm.
  const std::size_t needed = s.calibrated ? std::min<std::size_t>(options_.calibration_calls, 8) : options_.calibration_calls;
  if (s.calibration[0].size() < needed) return false;
  for (std::size_t p = 0; p < kTarPhases; ++p) {
    s.bound[p] = std::min(options_.cap_us, percentile(s.calibration[p], 0.95));
    s.calibration[p].clear();
    s.calibration[p].shrink_to_fit();
  }
  s.calibrated = true;
  return true;
}

void DeadlineController::set_bounds(unsigned cls, const std::array<double, kTarPhases>& bound_us) {
  auto it = classes_.find(cls);
  if (it == classes_.end() || !it->second.calibrated) return;
  for (std::size_t p = 0; p < kTarPhases; ++p) it->second.bound[p] = std::min(options_.cap_us, bound_us[p]);
}

void DeadlineController::record_estimate(unsigned cls, const std::array<double, kTarPhases>& estimate_us) {
  auto it = classes_.find(cls);
  if (it == classes_.end() || !it->second.calibrated) return;
  for (std::size_t p = 0; p < kTarPhases; ++p) {
    if (estimate_us[p] <= 0) continue;
    auto& recent = it->second.recent[p];
    recent.push_back(estimate_us[p]);
    if (recent.size() > options_.window) recent.pop_front();
  }
}

PhaseDeadlines DeadlineController::deadlines(unsigned cls) const {
  PhaseDeadlines d;
  auto it = classes_.find(cls);
  if (it == classes_.end() || !it->second.calibrated) {
    d.us.fill(options_.cap_us);
    return d;
  }
  const ClassState& s = it->second;
  for (std::size_t p = 0; p < kTarPhases; ++p) {
    const double estimate = s.recent[p].empty()
                                ? s.bound[p]
                                : percentile(std::vector<double>(s.recent[p].begin(), s.recent[p].end()), 0.5);
    const double ceiling = std::min(options_.cap_us, options_.ceiling_factor * s.bound[p]);
    d.us[p] = std::clamp(options_.margin * estimate, std::min(options_.floor_fraction * s.bound[p], ceiling), ceiling);
  }
  return d;
}

double DeadlineController::bound_us(unsigned cls, TarPhase phase) const {
  auto it = classes_.find(cls);
  return it == classes_.end() || !it->second.calibrated ? 0.0 : it->second.bound[static_cast<std::size_t>(phase)];
}

}  // namespace optireduce
