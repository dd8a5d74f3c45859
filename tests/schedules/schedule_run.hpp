// One seed's run: a job of engines over the scheduled network (ranks as threads), the schedule's
// calls, and what must hold of them whatever the network did:
//  - no hang: every call returns, every collective of the job's own layer is entered by every rank;
//  - the same outcome on every rank for every call: the same kind, success or failure, and after a
//    failure the same failure of every later call (they go to the MPI);
//  - results (float32 and 16-bit allreduces, and reduce-scatters, whose result is each rank's
//    block): exact calls bitwise the exact sum; bounded allreduces bitwise identical across ranks
//    (the fill agreement); every entry a sum of a subset of the ranks' contributions (never worse
//    than dropping what was missing), every entry that is not the exact sum counted as dropped,
//    and nothing written past the result (planned_call.hpp: the data);
//  - every bounded call ends by its hard bound, counted from the last rank's entry; those that
//    outlast their deadlines, stretches, resend rounds and agreement waits (plus descheduling the
//    schedule injected, and what the machine's scheduler took from the threads meanwhile,
//    measured) are counted: a peer's word lost at the end of the call holds them;
//  - the counters the ranks agree on are the same on every rank.
// A placed seed's calls (several ranks per host: the three stages, host_view.hpp) are checked
// with the three stages' semantics: an entry sums whole hosts' contributions, a rank's kind is its
// first exchange's (shared by every rank whose first exchange that slice is), an entry is exact
// where its slice's exchange was, and the time bounds hold as many times over as a rank runs
// exchanges one after another.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "fault_schedule.hpp"

namespace optireduce::schedules {

struct SeedOutcome {
  std::vector<std::string> disagreements;  // empty: the seed passed
  int calls_failed_everywhere = 0;
  int calls_run = 0;
  int past_waits = 0;  // bounded calls that outlasted their deadlines' waits (a peer's word lost)
  int three_stage_calls = 0, three_stage_bounded = 0;  // succeeded in three stages (every exchange bounded)
  double seconds = 0;
  std::string table;  // one line per call and rank (printed for a failing seed, or on request)
};

SeedOutcome run_seed(const FaultSchedule& schedule);

}  // namespace optireduce::schedules
