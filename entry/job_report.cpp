#include "job_report.hpp"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>

#include "optireduce/engine/log.hpp"
#include "optireduce/engine/report/report.hpp"
#include "optireduce/engine/report/stats.hpp"
#include "optireduce/engine/report/topology.hpp"

namespace optireduce::entry {
namespace {

RankReport this_rank(int rank, const EngineHistory& h) {
  RankReport r;
  r.rank = rank;
  r.host = host_name();
  r.stats = ProcessStats::instance().snapshot();
  r.topology = read_topology();
  for (const auto& t : h.transports) r.transports += (r.transports.empty() ? "" : ";") + t;
  r.engine_buffer_bytes = h.peak_buffer_bytes;
  r.largest_call_bytes = h.largest_call_bytes;
  r.rejected_messages = h.rejected_messages;
  r.divergent_calls = h.divergent_calls;
  r.fallbacks = h.fallbacks;
  r.injected_drops = h.injected_drops;
  r.fill_agreement_incomplete = h.fill_agreement_incomplete;
  r.calibration_reruns = h.calibration_reruns;
  r.resend_requests = h.resend_requests;
  r.resend_chunks_asked = h.resend_chunks_asked;
  r.resent_chunks = h.resent_chunks;
  r.contributions_added_on_arrival = h.contributions_added_on_arrival;
  r.contributions_waited_in_slot = h.contributions_waited_in_slot;
  r.late = h.late;
  r.rejected_by_reason = h.rejected_by_reason;
  r.transport_counters = h.transport_counters;
  return r;
}

std::span<const std::byte> bytes_of(const void* p, std::size_t n) { return {static_cast<const std::byte*>(p), n}; }

// The finalize line: rank 0 prints it when the job paid for something (entries compensated, a
// fallback, divergent replicas), or always at OPTIREDUCE_LOG=info.
void print_cost_line(Bootstrap& world, const RankReport& mine, int rank, bool always) {
  const RankFigures figures = figures_of(mine);
  const auto blobs = world.allgather(bytes_of(&figures, sizeof figures));
  if (rank != 0) return;
  std::vector<RankFigures> all;
  for (const auto& b : blobs) {
    if (b.size() != sizeof(RankFigures)) return;  // the front end's all-gather failed
    all.emplace_back();
    std::memcpy(&all.back(), b.data(), sizeof(RankFigures));
  }
  if (!(always || had_cost(all))) return;
  const std::string line = render_cost_line(all) + "\n";
  std::fputs(line.c_str(), stderr);
}

}  // namespace

void write_job_report(Bootstrap& world, int rank, int ranks, const Config& config, const Environment& environment,
                      const EngineHistory& history) {
  // Rank 0's settings decide for everyone (report path and log level may differ per rank, and
  // every rank must take part in the same gathers).
  const int mine = (config.report_path.empty() ? 0 : 1) | (log_enabled(LogLevel::warn) ? 2 : 0) |
                   (log_enabled(LogLevel::info) ? 4 : 0);
  const auto all = world.allgather(bytes_of(&mine, sizeof mine));
  int wanted = 0;
  if (!all.empty() && all[0].size() == sizeof wanted) std::memcpy(&wanted, all[0].data(), sizeof wanted);
  if (!wanted) return;
  const RankReport r = this_rank(rank, history);
  if (wanted & 6) print_cost_line(world, r, rank, wanted & 4);
  if (!(wanted & 1)) return;
  const std::string object = render_rank(r);
  const auto objects = world.allgather(bytes_of(object.data(), object.size()));
  if (rank != 0) return;
  std::vector<std::string> texts;
  for (const auto& o : objects) texts.emplace_back(reinterpret_cast<const char*>(o.data()), o.size());
  if (static_cast<int>(texts.size()) != ranks || std::any_of(texts.begin(), texts.end(), [](const auto& t) { return t.empty(); })) {
    OR_LOG(warn, "no report written to OPTIREDUCE_REPORT=\"%s\": the ranks' figures could not be gathered", config.report_path.c_str());
    return;
  }
  std::ofstream out(config.report_path, std::ios::trunc);
  out << render_report(effective_settings(environment, config), texts);
  if (!out) OR_LOG(warn, "cannot write the report to OPTIREDUCE_REPORT=\"%s\": %s", config.report_path.c_str(), std::strerror(errno));
  else OR_LOG(info, "report of %d ranks written to %s", ranks, config.report_path.c_str());
}

}  // namespace optireduce::entry
