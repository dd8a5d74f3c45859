// What the ranks tell at the end of a job, gathered over the world's bootstrap: OPTIREDUCE_REPORT
// (one JSON file rank 0 writes) and the finalize line (rank 0 prints it when the job paid for
// something, or always at OPTIREDUCE_LOG=info). Collective: every rank calls it.
#pragma once

#include "optireduce/engine/config/config.hpp"
#include "optireduce/engine/engine/bootstrap.hpp"
#include "engine_history.hpp"

namespace optireduce::entry {

void write_job_report(Bootstrap& world, int rank, int ranks, const Config& config, const Environment& environment,
                      const EngineHistory& history);

}  // namespace optireduce::entry
