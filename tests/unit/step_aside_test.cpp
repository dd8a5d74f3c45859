// The step aside to the MPI's allreduce: which calls sample which path, and that the ranks agree
// on each path's time on its slowest rank.
#include "optireduce/engine/deadlines/step_aside.hpp"

#include <gtest/gtest.h>

#include <memory>
#include <thread>

#include "inproc_transport.hpp"

namespace optireduce {
namespace {

using Path = StepAside::Path;
using testing::InProcBootstrap;
using testing::InProcFabric;

// Runs one size class's measurement on two ranks whose engine and MPI calls take the times
// given; returns each rank's path for the call after the measurement.
std::array<Path, 2> decide(std::array<double, 2> engine_us, std::array<double, 2> mpi_us) {
  auto fabric = std::make_shared<InProcFabric>(2);
  std::array<Path, 2> after{};
  std::array<std::thread, 2> ranks;
  for (int r = 0; r < 2; ++r)
    ranks[r] = std::thread([&, r] {
      InProcBootstrap bootstrap(fabric, r);
      StepAside aside(true, r);
      for (int call = 0; call < 1 + 2 * int(StepAside::kSamples); ++call) {
        const Path p = aside.next(20);
        const double us = p == Path::mpi_sample ? mpi_us[r] : engine_us[r];
        aside.record(20, p, us, bootstrap);
      }
      after[r] = aside.next(20);
    });
  for (auto& t : ranks) t.join();
  return after;
}

TEST(StepAside, FirstCallWarmsThenThePathsAlternate) {
  auto fabric = std::make_shared<InProcFabric>(1);
  InProcBootstrap bootstrap(fabric, 0);
  StepAside aside(true, 0);
  std::vector<Path> seen;
  for (int call = 0; call < 1 + 2 * int(StepAside::kSamples); ++call) {
    seen.push_back(aside.next(20));
    aside.record(20, seen.back(), seen.back() == Path::mpi_sample ? 10.0 : 20.0, bootstrap);
  }
  EXPECT_EQ(seen[0], Path::engine);
  for (std::size_t i = 1; i < seen.size(); ++i) EXPECT_EQ(seen[i], i % 2 ? Path::mpi_sample : Path::engine_sample) << i;
  EXPECT_EQ(aside.next(20), Path::mpi);
  EXPECT_EQ(aside.next(21), Path::engine) << "each size class is measured on its own";
  EXPECT_EQ(aside.classes_over_mpi(), 1u);
}

TEST(StepAside, TheSlowestRankOfEachPathDecidesOnEveryRank) {
  // Rank 1's MPI is slow: the MPI's slowest (900) loses to the engine's slowest (600).
  EXPECT_EQ(decide({500, 600}, {400, 900}), (std::array<Path, 2>{Path::engine, Path::engine}));
  // Both paths' slowest ranks: engine 700, MPI 650: the MPI wins on both ranks, though rank 0
  // alone measured its engine faster.
  EXPECT_EQ(decide({300, 700}, {650, 400}), (std::array<Path, 2>{Path::mpi, Path::mpi}));
  // The engine must be clearly faster to keep a class: 860 against 900 is not.
  EXPECT_EQ(decide({860, 500}, {900, 400}), (std::array<Path, 2>{Path::mpi, Path::mpi}));
}

TEST(StepAside, IneligibleCommunicatorsNeverLeaveTheEngine) {
  auto fabric = std::make_shared<InProcFabric>(1);
  InProcBootstrap bootstrap(fabric, 0);
  StepAside aside(false, 0);
  for (int call = 0; call < 20; ++call) {
    ASSERT_EQ(aside.next(20), Path::engine);
    aside.record(20, Path::engine, 1e9, bootstrap);
  }
}

}  // namespace
}  // namespace optireduce
