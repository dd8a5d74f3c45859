// One planned call on one rank: the data it sums, the buffers it runs on (in place every other
// call) and reading back what it gave. The data are integers: rank r contributes 2^r times a
// factor of the entry (1 to 13 for up to 4 ranks: at most 13 * 15 = 195; fewer past them, 1 to 4
// for 6 ranks: 4 * 63 = 252), so the sum of any subset of the ranks' contributions is at most
// 256, exact in float32 and in both 16-bit formats (bfloat16 holds every integer up to 256)
// whatever the order of the additions, and names its subset: the exact sum in each format is the
// float64 one, with no rounding to tolerate.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "fault_schedule.hpp"
#include "optireduce/engine/engine/engine.hpp"

namespace optireduce::schedules {

// What entry i of a call's input is multiplied by on every rank of a job of `ranks`.
float factor(int call, std::uint64_t i, int ranks);

struct CallBuffers {
  std::vector<std::byte> out;   // the output buffer (in place: the input, the result at its start)
  std::vector<std::byte> tail;  // what it held past the result before the call
};

// Runs the schedule's call `call` on this rank's engine.
CallStats run_planned_call(Engine& engine, const PlannedCall& planned, int call, CallBuffers& buffers);

// How many entries rank `rank`'s result has, and where the first sits in the call's input.
std::uint64_t result_entries(const PlannedCall& planned, int rank);
std::uint64_t first_entry(const PlannedCall& planned, int rank);
// Entry i of the result (16-bit entries widened, which is exact).
float result_value(const PlannedCall& planned, const CallBuffers& buffers, std::uint64_t i);
// Whether the output buffer past the result is still what it was (nothing written beyond it).
bool tail_intact(const PlannedCall& planned, int rank, const CallBuffers& buffers);

}  // namespace optireduce::schedules
