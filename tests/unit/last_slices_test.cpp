// When a phase that has a last slice from every sender asks for what it lacks: once the later
// last slices each announced had time to come, never at the first one's arrival.
#include <gtest/gtest.h>

#include <chrono>

#include "optireduce/engine/tar/all_gather.hpp"

namespace optireduce {
namespace {

using std::chrono::milliseconds;

TEST(LastSlices, AllInOnceEverySenderSentOne) {
  LastSlices last;
  last.begin(4);
  const auto everyone = [](int) { return true; };
  const Clock::time_point t0 = Clock::now();
  EXPECT_FALSE(last.all_in(0, everyone));
  last.note(1, 0, t0);
  last.note(2, 0, t0);
  EXPECT_FALSE(last.all_in(0, everyone));
  EXPECT_TRUE(last.all_in(0, [](int p) { return p != 3; })) << "rank 3 sends nothing to this rank";
  last.note(3, 0, t0);
  EXPECT_TRUE(last.all_in(0, everyone));
}

TEST(LastSlices, SettledWhenEverySenderSentItsFinalSlice) {
  LastSlices last;
  last.begin(3);
  const Clock::time_point t0 = Clock::now();
  last.note(1, 0, t0);
  last.note(2, 0, t0);
  EXPECT_EQ(last.settled_at(0, [](int) { return true; }, milliseconds(5)), Clock::time_point::min());
}

TEST(LastSlices, WaitsForAnnouncedSlicesFromTheFirstOneOnly) {
  LastSlices last;
  last.begin(3);
  const auto everyone = [](int) { return true; };
  const Clock::time_point t0 = Clock::now();
  last.note(1, 2, t0);  // two more follow from rank 1
  last.note(2, 0, t0 + milliseconds(1));
  EXPECT_EQ(last.settled_at(0, everyone, milliseconds(5)), t0 + milliseconds(5));
  // A later slice from rank 1 that still announces one more does not move the wait on: a lost
  // final slice must not hold the phase longer than `wait` after the first.
  last.note(1, 1, t0 + milliseconds(3));
  EXPECT_EQ(last.settled_at(0, everyone, milliseconds(5)), t0 + milliseconds(5));
  // Its final one settles it; a duplicate of an earlier one does not undo that.
  last.note(1, 0, t0 + milliseconds(4));
  last.note(1, 2, t0 + milliseconds(4));
  EXPECT_EQ(last.settled_at(0, everyone, milliseconds(5)), Clock::time_point::min());
}

TEST(LastSlices, OnlySendersToThisRankCount) {
  LastSlices last;
  last.begin(3);
  const Clock::time_point t0 = Clock::now();
  last.note(2, 1, t0);
  EXPECT_EQ(last.settled_at(0, [](int p) { return p != 2; }, milliseconds(5)), Clock::time_point::min());
  EXPECT_EQ(last.settled_at(2, [](int) { return true; }, milliseconds(5)), Clock::time_point::min()) << "its own";
}

}  // namespace
}  // namespace optireduce
