#include "optireduce/engine/deadlines/controller.hpp"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>

#include "optireduce/engine/report/stats.hpp"

namespace optireduce {

unsigned size_class(std::uint64_t bytes) { return bytes ? static_cast<unsigned>(std::bit_width(bytes) - 1) : 0; }

namespace {

// What the per-byte rules count a call as: an empty call is one byte.
double counted(double bytes) { return std::max(1.0, bytes); }
// The smallest call of a class, in bytes.
double smallest_bytes(unsigned cls) { return std::ldexp(1.0, static_cast<int>(size_class_of(cls))); }

}  // namespace

bool DeadlineController::calibrating(unsigned cls) const {
  auto it = classes_.find(cls);
  return it == classes_.end() || !it->second.calibrated;
}

bool DeadlineController::record_calibration(unsigned cls, const PhaseTimes& phase_us, double bytes) {
  ClassState& s = classes_[cls];
  for (std::size_t p = 0; p < kTarPhases; ++p) s.calibration[p].push_back(phase_us[p] / counted(bytes));
  // A recalibration, or the calibration of a size class after another one's, needs fewer calls
  // than the communicator's first: the engine and the path are warm (a training job's buckets
  // come in many sizes, and each would otherwise spend the full count exactly).
  const bool warm = s.calibrated || any_calibrated_;
  const std::size_t needed = warm ? std::min<std::size_t>(options_.calibration_calls, kWarmCalibrationCalls)
                                  : options_.calibration_calls;
  if (s.calibration[0].size() < needed) return false;
  for (std::size_t p = 0; p < kTarPhases; ++p) {
    s.bound_per_byte[p] = percentile(s.calibration[p], 0.95);
    s.calibration[p].clear();
    s.calibration[p].shrink_to_fit();
  }
  s.calibrated = true;
  any_calibrated_ = true;
  return true;
}

std::vector<std::byte> DeadlineController::bounds_blob(unsigned cls) const {
  auto it = classes_.find(cls);
  const PhaseTimes mine = it == classes_.end() || !it->second.calibrated ? PhaseTimes{} : it->second.bound_per_byte;
  std::vector<std::byte> blob(sizeof mine);
  std::memcpy(blob.data(), mine.data(), sizeof mine);
  return blob;
}

void DeadlineController::agree_bounds(unsigned cls, const std::vector<std::vector<std::byte>>& blobs) {
  auto it = classes_.find(cls);
  if (it == classes_.end() || !it->second.calibrated) return;
  // Each rank's calibration saw other phase times (who waited for whom differs); the most
  // impatient rank would give up on data the others are still sending, and with the fill
  // agreed its loss would become everybody's. One bound for all: the largest.
  PhaseTimes agreed = it->second.bound_per_byte;
  for (const auto& blob : blobs) {
    PhaseTimes theirs{};
    if (blob.size() != sizeof theirs) continue;
    std::memcpy(theirs.data(), blob.data(), sizeof theirs);
    for (std::size_t p = 0; p < kTarPhases; ++p)
      if (std::isfinite(theirs[p])) agreed[p] = std::max(agreed[p], theirs[p]);
  }
  it->second.bound_per_byte = agreed;
}

void DeadlineController::record_estimate(unsigned cls, const PhaseTimes& estimate_us, double bytes) {
  auto it = classes_.find(cls);
  if (it == classes_.end() || !it->second.calibrated) return;
  for (std::size_t p = 0; p < kTarPhases; ++p) {
    if (estimate_us[p] <= 0) continue;
    auto& recent = it->second.recent[p];
    recent.push_back({estimate_us[p], counted(bytes)});
    if (recent.size() > options_.window) recent.pop_front();
  }
}

PhaseDeadlines DeadlineController::bounded_budget(unsigned cls, double bytes) const {
  PhaseDeadlines d;
  auto it = classes_.find(cls);
  bytes = counted(bytes);
  if (it == classes_.end() || !it->second.calibrated) {
    d.us.fill(options_.cap_us);
    return d;
  }
  const ClassState& s = it->second;
  for (std::size_t p = 0; p < kTarPhases; ++p) {
    scratch_.clear();
    for (const Estimate& e : s.recent[p]) scratch_.push_back(e.us * std::max(1.0, bytes / e.bytes));
    const double bound = std::min(options_.cap_us, s.bound_per_byte[p] * bytes);
    const double estimate = scratch_.empty() ? bound : percentile_in_place(scratch_, 0.5);
    const double ceiling = std::min(options_.cap_us, options_.ceiling_factor * bound);
    d.us[p] = std::clamp(options_.margin * estimate, std::min(options_.floor_fraction * bound, ceiling), ceiling);
  }
  d.us[1] = std::max(d.us[1], 0.5 * d.us[0]);
  return d;
}

double DeadlineController::bound_us(TarPhase phase, unsigned cls, double bytes) const {
  auto it = classes_.find(cls);
  return it == classes_.end() || !it->second.calibrated
             ? 0.0
             : std::min(options_.cap_us, it->second.bound_per_byte[static_cast<std::size_t>(phase)] * counted(bytes));
}

double DeadlineController::probe_budget_us(unsigned cls) const {
  auto it = classes_.find(cls);
  double reference = it != classes_.end() ? it->second.fastest_exact_us : 0.0;
  // A class without an exact call yet: another class's fastest time per byte, for this class's
  // largest calls; before any exact call, a first budget.
  if (reference <= 0 && fastest_us_per_byte_ > 0) reference = fastest_us_per_byte_ * 2 * smallest_bytes(cls);
  if (reference <= 0) return std::min(options_.cap_us, kFirstRunBudgetUs);
  return std::min(options_.cap_us, std::max(kProbeBudgetFloorUs, kProbeBudgetFactor * reference));
}

void DeadlineController::note_exact_call(unsigned cls, double exact_us) {
  double& fastest = classes_[cls].fastest_exact_us;
  fastest = fastest > 0 ? std::min(fastest, exact_us) : exact_us;
  const double per_byte = exact_us / smallest_bytes(cls);
  fastest_us_per_byte_ = fastest_us_per_byte_ > 0 ? std::min(fastest_us_per_byte_, per_byte) : per_byte;
}

double DeadlineController::pace_bytes_per_s(double bytes, double call_us) {
  if (call_us > 0) pace_bytes_per_s_ = std::max(pace_bytes_per_s_, kPaceHeadroom * bytes / (call_us * 1e-6));
  return pace_bytes_per_s_;
}

double DeadlineController::probe_estimate_us(double needed, double phase_us) {
  return needed > 0 ? std::min(needed, kMaxStretch * phase_us) : phase_us;
}

double DeadlineController::needed_us(double phase_us, double fraction, Clock::time_point from, Clock::time_point last) {
  if (fraction >= 1.0) return phase_us;
  const double paced = std::chrono::duration<double, std::micro>(last - from).count();
  return fraction > 0.0 && paced > 0.0 ? paced / fraction : 0.0;
}

void PhaseStamps::reset(int ranks) {
  ranks_ = ranks;
  for (auto& s : stamps_) s.clear();
  seen_.assign(kTarPhases * static_cast<std::size_t>(ranks), 0);
}

void PhaseStamps::note(std::uint32_t source, float scatter_stamp, float gather_stamp) {
  const float values[kTarPhases] = {scatter_stamp, gather_stamp};
  for (std::size_t p = 0; p < kTarPhases; ++p) {
    auto& seen = seen_[p * static_cast<std::size_t>(ranks_) + source];
    if (seen || !(values[p] > 0)) continue;
    seen = 1;
    stamps_[p].push_back(values[p]);
  }
}

PhaseTimes PhaseStamps::medians() {
  PhaseTimes out{};
  for (std::size_t p = 0; p < kTarPhases; ++p) {
    if (stamps_[p].empty()) continue;
    std::vector<float>& v = stamps_[p];
    std::nth_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(v.size() / 2), v.end());
    out[p] = v[v.size() / 2];
  }
  return out;
}

}  // namespace optireduce
