#include "optireduce/engine/report/report.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <sstream>

#include "optireduce/optireduce.h"

namespace optireduce {

std::string json_escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\u%04x", c);
          out += buf;
        } else {
          out += c;
        }
    }
  }
  return out;
}

namespace {

std::string quoted(const std::string& s) { return "\"" + json_escape(s) + "\""; }

std::string object(const std::map<std::string, unsigned long long>& counts) {
  std::ostringstream o;
  o << "{";
  for (const auto& [name, n] : counts) o << (o.tellp() > 1 ? ", " : "") << quoted(name) << ": " << n;
  o << "}";
  return o.str();
}

std::string formatted(const char* format, double v) {
  char text[64];
  std::snprintf(text, sizeof text, format, v);
  return text;
}

std::string number(double v) { return formatted("%.6g", v); }

std::string quantiles(const LatencySummary& q) {
  return "{\"p50\": " + number(q.p50) + ", \"p99\": " + number(q.p99) + ", \"max\": " + number(q.max) + "}";
}

// {"name": count, ...} over the first n values of an enum, each named by its to_string.
template <typename Enum, typename CountOf>
std::string counts_by_name(std::size_t n, CountOf count_of) {
  std::map<std::string, unsigned long long> counts;
  for (std::size_t i = 0; i < n; ++i) counts[to_string(static_cast<Enum>(i))] = count_of(i);
  return object(counts);
}

std::string reasons(const StatsSnapshot& s) {
  return counts_by_name<PassReason>(kPassReasons, [&](std::size_t i) { return s.passthrough_by_reason[i]; });
}

// {"allreduce": {"float32": n, "float16": n, "bfloat16": n}, "reduce_scatter": {...}}: the
// intercepted calls by what they computed.
std::string operations(const StatsSnapshot& s) {
  std::ostringstream o;
  o << "{";
  for (std::size_t c = 0; c < kCollectives; ++c) {
    const auto collective = static_cast<Collective>(c);
    o << (c ? ", " : "") << quoted(to_string(collective)) << ": "
      << counts_by_name<ElementFormat>(kElementFormats, [&](std::size_t f) {
           return s.intercepted_by_shape[CallShape{collective, static_cast<ElementFormat>(f)}.index()];
         });
  }
  o << "}";
  return o.str();
}

std::string passthrough_operations(const StatsSnapshot& s) {
  return counts_by_name<Collective>(kCollectives, [&](std::size_t c) { return s.passthrough_by_collective[c]; });
}

std::string size_classes(const StatsSnapshot& s) {
  std::ostringstream o;
  o << "[";
  for (const auto& c : s.size_classes)
    o << (&c == &s.size_classes.front() ? "" : ", ") << "{\"bytes_from\": " << (1ull << c.size_class)
      << ", \"bytes_below\": " << (2ull << c.size_class) << ", \"calls\": " << c.calls << ", \"cut_calls\": " << c.cut_calls
      << ", \"latency_us\": " << quantiles(c.latency_us) << "}";
  o << "]";
  return o.str();
}

// "OPTIREDUCE_MIN_BYTES" -> "min_bytes": the report's key of a setting.
std::string config_key(const std::string& name) {
  std::string key = name.substr(std::strlen("OPTIREDUCE_"));
  for (char& c : key) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return key;
}

}  // namespace

std::vector<EffectiveSetting> effective_settings(const Environment& env, const Config& config) {
  std::vector<EffectiveSetting> out;
  for (const auto& p : parameters()) {
    EffectiveSetting s{p.name, p.default_text, "default"};
    if (auto it = config.source.find(p.name); it != config.source.end()) s.source = it->second;
    for (const auto& [name, value] : env)
      if (name == p.name) s.value = value;
    out.push_back(std::move(s));
  }
  return out;
}

std::string render_rank(const RankReport& r) {
  const auto& s = r.stats;
  std::ostringstream o;
  o << "{\"rank\": " << r.rank << ", \"host\": " << quoted(r.host) << ", \"intercepted_calls\": " << s.intercepted_calls
    << ", \"intercepted_by_operation\": " << operations(s) << ", \"passthrough_calls\": " << s.passthrough_calls
    << ", \"passthrough_by_reason\": " << reasons(s) << ", \"passthrough_by_operation\": " << passthrough_operations(s)
    << ", \"bytes_reduced\": " << s.bytes_reduced << ", \"entries_reduced\": " << s.entries_reduced
    << ", \"entries_dropped\": " << s.entries_dropped << ", \"dropped_fraction\": " << number(s.dropped_fraction())
    << ", \"time_in_allreduce_us\": {\"engine\": " << number(s.engine_time_us)
    << ", \"passthrough\": " << number(s.passthrough_time_us) << "}"
    << ", \"latency_us\": " << quantiles(s.latency_us) << ", \"size_classes\": " << size_classes(s)
    << ", \"bounded_calls\": " << s.bounded_calls << ", \"cut_calls\": " << s.cut_calls
    << ", \"fallback_calls\": " << s.fallback_calls << ", \"mpi_calls\": " << s.mpi_calls
    << ", \"hierarchy\": {\"placement\": " << quoted(s.placement) << ", \"calls\": " << s.hierarchical_calls
    << ", \"host_reduce_us\": " << number(s.stage_totals.host_reduce_us) << ", \"exchange_us\": " << number(s.stage_totals.exchange_us)
    << ", \"host_gather_us\": " << number(s.stage_totals.host_gather_us)
    << ", \"network_bytes\": " << s.stage_totals.network_bytes << ", \"shared_memory_bytes\": " << s.stage_totals.shared_memory_bytes << "}" << ", \"deadline_us\": " << quantiles(s.deadline_us)
    << ", \"late_arrivals\": {\"messages\": " << r.late.messages << ", \"bytes\": " << r.late.bytes
    << ", \"wait_us\": " << number(r.late.wait_us) << ", \"call_wait_us\": " << number(r.late.call_wait_us) << "}"
    << ", \"divergent_calls\": " << r.divergent_calls << ", \"fallbacks\": " << r.fallbacks
    << ", \"injected_drops\": " << r.injected_drops << ", \"fill_agreement_incomplete\": " << r.fill_agreement_incomplete
    << ", \"calibration_reruns\": " << r.calibration_reruns
    << ", \"resends\": {\"requests\": " << r.resend_requests << ", \"chunks_asked\": " << r.resend_chunks_asked
    << ", \"chunks_resent\": " << r.resent_chunks << "}"
    << ", \"contributions\": {\"added_on_arrival\": " << r.contributions_added_on_arrival
    << ", \"waited_in_slot\": " << r.contributions_waited_in_slot << "}"
    << ", \"engines_created\": " << s.engines_created << ", \"engine_failures\": " << s.engine_failures
    << ", \"rejected_messages\": " << r.rejected_messages << ", \"rejected_by_reason\": " << object(r.rejected_by_reason)
    << ", \"transports\": " << quoted(r.transports) << ", \"transport_counters\": " << object(r.transport_counters)
    << ", \"engine_buffer_bytes\": " << r.engine_buffer_bytes << ", \"largest_call_bytes\": " << r.largest_call_bytes
    << ", \"topology\": {\"packages\": " << r.topology.packages << ", \"cores\": " << r.topology.cores
    << ", \"hardware_threads\": " << r.topology.hardware_threads << ", \"numa_nodes\": " << r.topology.numa_nodes
    << ", \"cpu\": " << r.topology.cpu_of_thread << ", \"numa_node\": " << r.topology.numa_node_of_thread << "}}";
  return o.str();
}

std::string render_report(const std::vector<EffectiveSetting>& settings, const std::vector<std::string>& rank_objects) {
  std::ostringstream o;
  o << "{\n  \"library\": \"optireduce\",\n  \"version\": \"" << OPTIREDUCE_VERSION_MAJOR << '.' << OPTIREDUCE_VERSION_MINOR << '.'
    << OPTIREDUCE_VERSION_PATCH << "\",\n  \"config\": {";
  std::string from_environment;
  for (const auto& s : settings) {
    o << (&s == &settings.front() ? "" : ", ") << quoted(config_key(s.name)) << ": " << quoted(s.value);
    if (s.source == "environment") from_environment += (from_environment.empty() ? "" : ", ") + quoted(config_key(s.name));
  }
  o << "},\n  \"config_from_environment\": [" << from_environment << "],\n  \"ranks\": [\n";
  for (std::size_t i = 0; i < rank_objects.size(); ++i)
    o << "    " << rank_objects[i] << (i + 1 < rank_objects.size() ? ",\n" : "\n");
  o << "  ]\n}\n";
  return o.str();
}

RankFigures figures_of(const RankReport& r) {
  const auto& s = r.stats;
  RankFigures f;
  f.calls = double(s.intercepted_calls + s.passthrough_calls);
  f.intercepted = double(s.intercepted_calls);
  const auto scatter = static_cast<std::size_t>(Collective::reduce_scatter);
  f.reduce_scatter_calls = double(s.passthrough_by_collective[scatter]);
  for (std::size_t i = 0; i < kElementFormats; ++i)
    f.reduce_scatter_calls += double(s.intercepted_by_shape[CallShape{Collective::reduce_scatter, static_cast<ElementFormat>(i)}.index()]);
  f.bounded = double(s.bounded_calls);
  f.cut = double(s.cut_calls);
  f.entries = double(s.entries_reduced);
  f.dropped = double(s.entries_dropped);
  f.time_us = s.engine_time_us + s.passthrough_time_us;
  f.fallbacks = double(r.fallbacks);
  f.divergent = double(r.divergent_calls);
  f.late_messages = double(r.late.messages);
  f.late_wait_us = r.late.call_wait_us;
  return f;
}

namespace {

// Sums over ranks, except what all ranks of a communicator agreed on (fallbacks, divergent
// calls), which every rank counts alike: the largest count of a rank.
RankFigures job_figures(const std::vector<RankFigures>& ranks) {
  RankFigures t;
  for (const auto& f : ranks) {
    t.calls += f.calls, t.reduce_scatter_calls += f.reduce_scatter_calls, t.intercepted += f.intercepted, t.bounded += f.bounded, t.cut += f.cut;
    t.entries += f.entries, t.dropped += f.dropped, t.time_us += f.time_us;
    t.late_messages += f.late_messages, t.late_wait_us += f.late_wait_us;
    t.fallbacks = std::max(t.fallbacks, f.fallbacks);
    t.divergent = std::max(t.divergent, f.divergent);
  }
  return t;
}

std::string duration_text(double us) {
  if (us <= 0) return "0 s";
  if (us < 1e3) return formatted("%.3g us", us);
  if (us < 1e6) return formatted("%.3g ms", us / 1e3);
  return formatted(us < 1e8 ? "%.3g s" : "%.0f s", us / 1e6);
}

std::string count_text(double n) { return formatted("%.0f", n); }

}  // namespace

bool had_cost(const std::vector<RankFigures>& ranks) {
  const RankFigures t = job_figures(ranks);
  return t.dropped > 0 || t.fallbacks > 0 || t.divergent > 0;
}

std::string render_cost_line(const std::vector<RankFigures>& ranks) {
  const RankFigures t = job_figures(ranks);
  const std::string share = formatted("%.3g", t.entries > 0 ? 100.0 * t.dropped / t.entries : 0.0);
  std::ostringstream o;
  o << "optireduce: " << count_text(t.calls - t.reduce_scatter_calls) << " allreduce";
  if (t.reduce_scatter_calls > 0) o << " and " << count_text(t.reduce_scatter_calls) << " reduce-scatter";
  o << " calls over " << ranks.size() << " ranks (" << count_text(t.intercepted) << " through the engine, "
    << count_text(t.bounded) << " bounded, " << count_text(t.cut) << " cut by a deadline), " << duration_text(t.time_us)
    << (t.reduce_scatter_calls > 0 ? " in allreduce and reduce-scatter; " : " in allreduce; ") << count_text(t.dropped) << " of "
    << count_text(t.entries) << " entries compensated, " << count_text(t.fallbacks) << " fallbacks to exact calls, "
    << count_text(t.divergent) << " divergent calls; deadlines saved " << duration_text(t.late_wait_us)
    << " of waiting, cost " << share << " % of entries";
  return o.str();
}

std::string output_path_problem(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) == 0) {
    if (S_ISDIR(st.st_mode)) return "it is a directory";
    const int fd = ::open(path.c_str(), O_WRONLY | O_APPEND | O_CLOEXEC);
    if (fd < 0) return std::strerror(errno);
    ::close(fd);
    return {};
  }
  if (errno != ENOENT) return std::strerror(errno);
  const std::size_t slash = path.find_last_of('/');
  const std::string dir = slash == std::string::npos ? "." : slash == 0 ? "/" : path.substr(0, slash);
  if (::stat(dir.c_str(), &st) != 0) return errno == ENOENT ? "the directory " + dir + " does not exist" : std::strerror(errno);
  if (!S_ISDIR(st.st_mode)) return dir + " is not a directory";
  // Only creating a file tells (read-only file systems, ACLs, root squash); another rank may be
  // checking the same path at once.
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd < 0) return errno == EEXIST ? std::string() : "cannot create a file in " + dir + ": " + std::strerror(errno);
  ::close(fd);
  ::unlink(path.c_str());
  return {};
}

}  // namespace optireduce
