// The JSON report: one object per rank, assembled by rank 0 into one file at MPI_Finalize.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "optireduce/engine/config.hpp"
#include "optireduce/engine/stats.hpp"
#include "optireduce/engine/topology.hpp"

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
  std::map<std::string, unsigned long long> rejected_by_reason;
  std::map<std::string, unsigned long long> transport_counters;  // e.g. datagrams_sent, fec_repaired
};

std::string render_rank(const RankReport& r);
// rank_objects: the render_rank() text of every rank, in rank order.
std::string render_report(const Config& config, const std::vector<std::string>& rank_objects);
// One human line for stderr.
std::string render_summary(const std::vector<RankReport>& ranks);

std::string json_escape(const std::string& s);

}  // namespace optireduce
