// The JSON report (one object per rank, assembled by rank 0 into one file at MPI_Finalize), the
// one-line summary rank 0 prints there, and the checks of the output paths.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "optireduce/engine/report/call_stats.hpp"
#include "optireduce/engine/config/config.hpp"
#include "optireduce/engine/report/stats.hpp"
#include "optireduce/engine/report/topology.hpp"

namespace optireduce {

struct RankReport {
  int rank = 0;
  std::string host;
  StatsSnapshot stats;
  TopologySummary topology;
  std::string transports;          // what the engines actually used, e.g. "tcp/lo"
  std::size_t engine_buffer_bytes = 0;  // peak over the engines of this rank
  std::size_t largest_call_bytes = 0;
  unsigned long long rejected_messages = 0;
  unsigned long long divergent_calls = 0;  // agreed by all ranks of each communicator
  unsigned long long fallbacks = 0;
  unsigned long long injected_drops = 0;
  unsigned long long fill_agreement_incomplete = 0;  // bounded calls that filled without every rank's list
  unsigned long long calibration_reruns = 0;  // calibration calls run again over the exact path
  unsigned long long resend_requests = 0, resend_chunks_asked = 0, resent_chunks = 0;  // lost datagrams asked for again
  // Scatter-reduce contributions summed where the transport held them, and those copied to a slot first.
  unsigned long long contributions_added_on_arrival = 0, contributions_waited_in_slot = 0;
  LateArrivals late;  // data that came after its call had closed; call_wait_us: the wait saved
  std::map<std::string, unsigned long long> rejected_by_reason;
  std::map<std::string, unsigned long long> transport_counters;  // e.g. datagrams_sent, fec_repaired
};

// One setting as it is in force: the environment's text when it was set (parse_config accepted
// it), else the documented default.
struct EffectiveSetting {
  std::string name, value, source;  // source: "default" or "environment"
};
std::vector<EffectiveSetting> effective_settings(const Environment& env, const Config& config);

std::string render_rank(const RankReport& r);
// rank_objects: the render_rank() text of every rank, in rank order.
std::string render_report(const std::vector<EffectiveSetting>& settings, const std::vector<std::string>& rank_objects);

// What the finalize line needs of one rank; rank 0 gathers them as kFigures doubles per rank.
struct RankFigures {
  double calls = 0, reduce_scatter_calls = 0, intercepted = 0, bounded = 0, cut = 0, entries = 0, dropped = 0, time_us = 0;
  double fallbacks = 0, divergent = 0, late_messages = 0, late_wait_us = 0;
};
inline constexpr int kFigures = sizeof(RankFigures) / sizeof(double);
RankFigures figures_of(const RankReport& r);
// True when some entry was compensated, a communicator fell back to exact calls or replicas
// diverged: what the line is printed for by default.
bool had_cost(const std::vector<RankFigures>& ranks);
// "optireduce: 480 MPI_Allreduce calls over 4 ranks (...); deadlines saved 41 s of waiting, cost
// 0.41 % of entries" (without a newline).
std::string render_cost_line(const std::vector<RankFigures>& ranks);

// Why `path` cannot take an output file ("" when it can): the directory is missing or not
// writable, the path is a directory, the file is read-only. Leaves an existing file as it was and
// creates none.
std::string output_path_problem(const std::string& path);

std::string json_escape(const std::string& s);

}  // namespace optireduce
