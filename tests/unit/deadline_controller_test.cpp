// The deadline controller driven by synthetic traces.
#include <gtest/gtest.h>

#include <cstring>

#include "optireduce/engine/deadlines/controller.hpp"

namespace optireduce {
namespace {

// Calls of 1 MiB (class 20) and 2 MiB (class 21).
constexpr double kMiB = 1 << 20;

DeadlineOptions options() {
  DeadlineOptions o;
  o.calibration_calls = 20;
  o.cap_us = 100000;
  o.margin = 1.5;
  o.floor_fraction = 0.5;
  o.window = 9;
  o.ceiling_factor = 100;  // out of the way, except where a test is about it
  return o;
}

// Calibrates class 20 with phase times 1000 us (scatter) and 800 us (gather), one slow outlier.
DeadlineController calibrated() {
  DeadlineController c(options());
  for (int i = 0; i < 20; ++i) {
    EXPECT_TRUE(c.calibrating(20));
    // True exactly when the call completes the calibration (the engine then agrees the bounds).
    EXPECT_EQ(c.record_calibration(size_class(kMiB), {i == 7 ? 50000.0 : 1000.0 + i, 800.0}, kMiB), i == 19);
  }
  EXPECT_FALSE(c.calibrating(20));
  return c;
}

TEST(DeadlineController, SizeClassesArePowerOfTwoRanges) {
  EXPECT_EQ(size_class(1u << 20), 20u);
  EXPECT_EQ(size_class((2u << 20) - 1), 20u);
  EXPECT_EQ(size_class(2u << 20), 21u);
  EXPECT_EQ(size_class(0), 0u);
}

TEST(DeadlineController, CapUntilCalibratedThenMarginTimesP95) {
  DeadlineController c(options());
  EXPECT_EQ(c.bounded_budget(size_class(kMiB), kMiB).us[0], 100000);
  c = calibrated();
  // p95 of 20 samples is the 19th smallest: 1019 (the single 50 ms outlier is above it).
  EXPECT_DOUBLE_EQ(c.bound_us(TarPhase::scatter, size_class(kMiB), kMiB), 1019);
  EXPECT_DOUBLE_EQ(c.bounded_budget(size_class(kMiB), kMiB).us[0], 1.5 * 1019);
  EXPECT_DOUBLE_EQ(c.bounded_budget(size_class(kMiB), kMiB).us[1], 1.5 * 800);
  EXPECT_TRUE(c.calibrating(21)) << "each size class calibrates on its own";
}

TEST(DeadlineController, LaterSizeClassesCalibrateInFewerCalls) {
  auto c = calibrated();  // the first class took all 20
  for (int i = 0; i < 7; ++i)  // the warm count is 8
    EXPECT_FALSE(c.record_calibration(size_class(2 * kMiB), {2000.0, 1500.0}, 2 * kMiB)) << i;
  EXPECT_TRUE(c.record_calibration(size_class(2 * kMiB), {2000.0, 1500.0}, 2 * kMiB));
  EXPECT_FALSE(c.calibrating(21));
  EXPECT_DOUBLE_EQ(c.bound_us(TarPhase::gather, size_class(2 * kMiB), 2 * kMiB), 1500);
}

TEST(DeadlineController, QuietNetworkShrinksTheDeadlineDownToTheFloor) {
  auto c = calibrated();
  for (int i = 0; i < 9; ++i) c.record_estimate(size_class(kMiB), {600, 500}, kMiB);
  EXPECT_DOUBLE_EQ(c.bounded_budget(size_class(kMiB), kMiB).us[0], 900);  // 1.5 * 600
  for (int i = 0; i < 9; ++i) c.record_estimate(size_class(kMiB), {100, 100}, kMiB);
  EXPECT_DOUBLE_EQ(c.bounded_budget(size_class(kMiB), kMiB).us[0], 509.5);  // floor: 0.5 * tB
  EXPECT_DOUBLE_EQ(c.bounded_budget(size_class(kMiB), kMiB).us[1], 400);
}

TEST(DeadlineController, BusyNetworkGrowsItButNeverPastTheCap) {
  auto c = calibrated();
  for (int i = 0; i < 9; ++i) c.record_estimate(size_class(kMiB), {3000, 2000}, kMiB);
  EXPECT_DOUBLE_EQ(c.bounded_budget(size_class(kMiB), kMiB).us[0], 4500);
  for (int i = 0; i < 9; ++i) c.record_estimate(size_class(kMiB), {500000, 500000}, kMiB);
  EXPECT_DOUBLE_EQ(c.bounded_budget(size_class(kMiB), kMiB).us[0], 100000);
}

TEST(DeadlineController, ASpikeDoesNotMoveItALastingStepDoes) {
  auto c = calibrated();
  for (int i = 0; i < 9; ++i) c.record_estimate(size_class(kMiB), {1000, 1000}, kMiB);
  c.record_estimate(size_class(kMiB), {40000, 40000}, kMiB);  // one call hit a retransmission
  EXPECT_DOUBLE_EQ(c.bounded_budget(size_class(kMiB), kMiB).us[0], 1500);
  // The network steps to 4 ms for good: within half a window the deadline follows.
  int calls = 0;
  while (c.bounded_budget(size_class(kMiB), kMiB).us[0] < 1.5 * 4000 && calls < 20) {
    c.record_estimate(size_class(kMiB), {4000, 4000}, kMiB);
    ++calls;
  }
  EXPECT_LE(calls, 5);
  EXPECT_DOUBLE_EQ(c.bounded_budget(size_class(kMiB), kMiB).us[0], 6000);
}

TEST(DeadlineController, NeverAboveItsCeilingAndExactCallsRecalibrate) {
  DeadlineOptions o = options();
  o.ceiling_factor = 4;
  DeadlineController c(o);
  for (int i = 0; i < 20; ++i) c.record_calibration(size_class(kMiB), {1000.0, 1000.0}, kMiB);
  for (int i = 0; i < 9; ++i) c.record_estimate(size_class(kMiB), {50000, 50000}, kMiB);
  EXPECT_DOUBLE_EQ(c.bounded_budget(size_class(kMiB), kMiB).us[0], 4000) << "4 x tB";
  // The exact calls after a fallback measure the slower network: tB follows after 8 of them.
  for (int i = 0; i < 8; ++i) c.record_calibration(size_class(kMiB), {20000.0, 20000.0}, kMiB);
  EXPECT_DOUBLE_EQ(c.bound_us(TarPhase::scatter, size_class(kMiB), kMiB), 20000);
  EXPECT_DOUBLE_EQ(c.bounded_budget(size_class(kMiB), kMiB).us[0], 75000) << "1.5 x the estimates, now under 4 x the new tB";
}

TEST(DeadlineController, AgreedBoundsReplaceTheOwnOnesAndStayCapped) {
  DeadlineController c = calibrated();
  const double own = c.bound_us(TarPhase::scatter, size_class(kMiB), kMiB);
  // Another rank's bounds: larger for the scatter, beyond the cap for the gather; the own ones
  // are the smallest, so the other rank's win, capped.
  auto blob = [](double scatter, double gather) {
    const PhaseTimes b{scatter, gather};
    std::vector<std::byte> bytes(sizeof b);
    std::memcpy(bytes.data(), b.data(), sizeof b);
    return bytes;
  };
  // (Bounds travel per byte.)
  c.agree_bounds(20, {c.bounds_blob(20), blob(4 * own / kMiB, 2e9)});
  EXPECT_EQ(c.bound_us(TarPhase::scatter, size_class(kMiB), kMiB), 4 * own);
  EXPECT_EQ(c.bound_us(TarPhase::gather, size_class(kMiB), kMiB), 100000);
  EXPECT_DOUBLE_EQ(c.bounded_budget(size_class(kMiB), kMiB).us[0], 1.5 * 4 * own);  // no estimates yet: margin x bound
  c.agree_bounds(21, {blob(1, 1)});  // a class not calibrated yet: nothing to agree on
  EXPECT_TRUE(c.calibrating(21));
}

TEST(DeadlineController, PhasesWithoutStampsKeepTheirEstimate) {
  auto c = calibrated();
  for (int i = 0; i < 9; ++i) c.record_estimate(size_class(kMiB), {2000, 0}, kMiB);
  EXPECT_DOUBLE_EQ(c.bounded_budget(size_class(kMiB), kMiB).us[0], 3000);
  // No gather stamps: still 1.5 * tB (1200), but the all-gather gets at least half the scatter budget.
  EXPECT_DOUBLE_EQ(c.bounded_budget(size_class(kMiB), kMiB).us[1], 1500);
}

TEST(DeadlineController, CallsOfOneClassButOtherSizesScaleUpNeverDown) {
  // Class 22 spans 4 to 8 MiB: a training job's buckets of 4 and 7.75 MiB share it.
  DeadlineController c(options());
  const double small = 4 * kMiB, large = 7.75 * kMiB;
  for (int i = 0; i < 20; ++i) c.record_calibration(size_class(small), {4000.0, 4000.0}, small);
  // The bound is per byte: a larger call's is larger by its size.
  EXPECT_DOUBLE_EQ(c.bound_us(TarPhase::scatter, size_class(small), small), 4000);
  EXPECT_DOUBLE_EQ(c.bound_us(TarPhase::scatter, size_class(large), large), 7750);
  for (int i = 0; i < 9; ++i) c.record_estimate(size_class(small), {4000, 4000}, small);
  // Estimates of the smaller calls, scaled up to the larger one's size.
  EXPECT_DOUBLE_EQ(c.bounded_budget(size_class(large), large).us[0], 1.5 * 7750);
  EXPECT_DOUBLE_EQ(c.bounded_budget(size_class(small), small).us[0], 1.5 * 4000);
  // Estimates of larger calls are not scaled down for a smaller one (its fixed costs are the same).
  for (int i = 0; i < 9; ++i) c.record_estimate(size_class(large), {7750, 7750}, large);
  EXPECT_DOUBLE_EQ(c.bounded_budget(size_class(small), small).us[0], 1.5 * 7750);
  EXPECT_DOUBLE_EQ(c.bounded_budget(size_class(large), large).us[0], 1.5 * 7750);
}

TEST(DeadlineController, AnnouncedLastSlicesGetAShortGraceNeverMoreThanAResendWait) {
  // A small budget: the floor, though not past the resend wait.
  EXPECT_DOUBLE_EQ(DeadlineController::follow_wait_us(1000), 1000);
  // A larger one: its grace.
  EXPECT_DOUBLE_EQ(DeadlineController::follow_wait_us(100000), DeadlineController::grace_us(100000));
  for (double b : {10.0, 1e3, 1e5, 1e7})
    EXPECT_LE(DeadlineController::follow_wait_us(b), DeadlineController::resend_wait_us(b));
}

}  // namespace
}  // namespace optireduce
