// optireduce-bench's JSON: the run (who, where, what the library did) and each entry's figures and
// calls. scripts/bench/summarize.py reads it; scripts/bench/gloo_bench.py writes the same.
#pragma once

#include <string>
#include <vector>

#include "engine_probe.hpp"
#include "options.hpp"
#include "runner.hpp"

namespace optireduce::bench {

// Nearest rank: with few iterations p99 is the worst one, never an interpolation.
double percentile(std::vector<double> v, double p);

// The timed iterations of an entry (the warm-up ones left out).
std::vector<double> timed(const std::vector<double>& per_iteration, const Options& opt);

std::string run_json(const Options& opt, int nranks, const EngineProbe& probe, double peak_rss_mib,
                     const std::vector<EntryResult>& results);

}  // namespace optireduce::bench
