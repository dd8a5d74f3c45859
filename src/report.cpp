#include "optireduce/engine/report.hpp"

#include <algorithm>
#include <cstdio>
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
std::string object(const std::map<std::string, unsigned long long>& counts) {
  std::ostringstream o;
  o << "{";
  for (const auto& [name, n] : counts) o << (o.tellp() > 1 ? ", " : "") << "\"" << json_escape(name) << "\": " << n;
  o << "}";
  return o.str();
}

std::string number(double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.6g", v);
  return buf;
}
}  // namespace

std::string render_rank(const RankReport& r) {
  const auto& s = r.stats;
  std::ostringstream o;
  o << "{\"rank\": " << r.rank << ", \"host\": \"" << json_escape(r.host) << "\""
    << ", \"intercepted_calls\": " << s.intercepted_calls << ", \"passthrough_calls\": " << s.passthrough_calls
    << ", \"bytes_reduced\": " << s.bytes_reduced << ", \"entries_reduced\": " << s.entries_reduced
    << ", \"entries_dropped\": " << s.entries_dropped << ", \"dropped_fraction\": " << number(s.dropped_fraction())
    << ", \"latency_us\": {\"p50\": " << number(s.latency_us.p50) << ", \"p99\": " << number(s.latency_us.p99)
    << ", \"max\": " << number(s.latency_us.max) << "}"
    << ", \"bounded_calls\": " << s.bounded_calls << ", \"fallback_calls\": " << s.fallback_calls
    << ", \"deadline_us\": {\"p50\": " << number(s.deadline_us.p50) << ", \"p99\": " << number(s.deadline_us.p99)
    << ", \"max\": " << number(s.deadline_us.max) << "}"
    << ", \"divergent_calls\": " << r.divergent_calls << ", \"fallbacks\": " << r.fallbacks
    << ", \"injected_drops\": " << r.injected_drops << ", \"fill_agreement_incomplete\": " << r.fill_agreement_incomplete
    << ", \"engines_created\": " << s.engines_created << ", \"engine_failures\": " << s.engine_failures
    << ", \"rejected_messages\": " << r.rejected_messages << ", \"rejected_by_reason\": " << object(r.rejected_by_reason)
    << ", \"transports\": \"" << json_escape(r.transports) << "\""
    << ", \"transport_counters\": " << object(r.transport_counters)
    << ", \"engine_buffer_bytes\": " << r.engine_buffer_bytes << ", \"largest_call_bytes\": " << r.largest_call_bytes
    << ", \"topology\": {\"packages\": " << r.topology.packages << ", \"cores\": " << r.topology.cores
    << ", \"hardware_threads\": " << r.topology.hardware_threads << ", \"numa_nodes\": " << r.topology.numa_nodes
    << ", \"cpu\": " << r.topology.cpu_of_thread << ", \"numa_node\": " << r.topology.numa_node_of_thread << "}}";
  return o.str();
}

std::string render_report(const Config& config, const std::vector<std::string>& rank_objects) {
  std::ostringstream o;
  o << "{\n  \"library\": \"optireduce\",\n  \"version\": \"" << OPTIREDUCE_VERSION_MAJOR << '.' << OPTIREDUCE_VERSION_MINOR
    << '.' << OPTIREDUCE_VERSION_PATCH << "\",\n  \"config\": {\"mode\": \"" << to_string(config.mode)
    << "\", \"transport\": \"" << to_string(config.transport) << "\", \"min_bytes\": " << config.min_bytes
    << ", \"chunk_bytes\": " << config.chunk_bytes << ", \"timeout_ms\": " << config.timeout_ms
    << ", \"loss_budget\": " << number(config.loss_budget) << ", \"agree_fill\": " << (config.agree_fill ? "true" : "false") << ", \"fill\": \"" << (config.fill_local ? "local" : "zero")
    << "\", \"calibration_calls\": " << config.calibration_calls
    << ", \"hadamard\": \"" << (config.hadamard == HadamardMode::off ? "off" : config.hadamard == HadamardMode::on ? "on" : "auto") << "\"" << ", \"fault_drop\": " << number(config.faults.drop)
    << "},\n  \"ranks\": [\n";
  for (std::size_t i = 0; i < rank_objects.size(); ++i)
    o << "    " << rank_objects[i] << (i + 1 < rank_objects.size() ? ",\n" : "\n");
  o << "  ]\n}\n";
  return o.str();
}

std::string render_summary(const std::vector<RankReport>& ranks) {
  unsigned long long intercepted = 0, passthrough = 0, bytes = 0, entries = 0, dropped = 0;
  double p50 = 0, p99 = 0;
  for (const auto& r : ranks) {
    intercepted += r.stats.intercepted_calls;
    passthrough += r.stats.passthrough_calls;
    bytes += r.stats.bytes_reduced;
    entries += r.stats.entries_reduced;
    dropped += r.stats.entries_dropped;
    p50 = std::max(p50, r.stats.latency_us.p50);
    p99 = std::max(p99, r.stats.latency_us.p99);
  }
  std::ostringstream o;
  o << "summary: " << ranks.size() << " ranks, " << intercepted << " intercepted and " << passthrough
    << " passed-through allreduce calls, " << number(static_cast<double>(bytes) / (1 << 20)) << " MiB reduced, dropped fraction "
    << number(entries ? static_cast<double>(dropped) / static_cast<double>(entries) : 0.0) << ", latency p50 "
    << number(p50) << " us, p99 " << number(p99) << " us (worst rank)";
  return o.str();
}

}  // namespace optireduce
