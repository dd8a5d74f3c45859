#include "optireduce/engine/config/config.hpp"

#include <cctype>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <sstream>

#include "optireduce/enumerator_name.hpp"

extern char** environ;

namespace optireduce {
namespace {

constexpr const char* kPrefix = "OPTIREDUCE_";
constexpr const char* kUcxPrefix = "OPTIREDUCE_UCX_";

bool starts_with(const std::string& s, const char* prefix) { return s.rfind(prefix, 0) == 0; }

const Parameter* find_parameter(const std::string& name) {
  for (const auto* table : {&engine_parameters(), &fault_parameters(), &transport_parameters(), &output_parameters()})
    for (const auto& p : *table)
      if (p.info.name == name) return &p;
  return nullptr;
}

}  // namespace

const char* to_string(Mode mode) { return enumerator_name(mode, {"bounded", "reliable", "off"}); }

const std::vector<ParameterInfo>& parameters() {
  static const std::vector<ParameterInfo> infos = [] {
    std::vector<ParameterInfo> v;
    for (const auto* table : {&engine_parameters(), &fault_parameters(), &transport_parameters(), &output_parameters()})
      for (const auto& p : *table) v.push_back(p.info);
    return v;
  }();
  return infos;
}

bool parse_byte_count(const std::string& text, std::uint64_t& out) {
  if (text.empty() || !std::isdigit(static_cast<unsigned char>(text[0]))) return false;
  std::size_t i = 0;
  std::uint64_t n = 0;
  while (i < text.size() && std::isdigit(static_cast<unsigned char>(text[i]))) {
    const auto d = static_cast<std::uint64_t>(text[i] - '0');
    if (n > (std::numeric_limits<std::uint64_t>::max() - d) / 10) return false;
    n = n * 10 + d;
    ++i;
  }
  unsigned shift = 0;
  if (i < text.size()) {
    switch (text[i]) {
      case 'k': case 'K': shift = 10; break;
      case 'm': case 'M': shift = 20; break;
      case 'g': case 'G': shift = 30; break;
      default: return false;
    }
    if (++i != text.size()) return false;
  }
  if (shift && n > (std::numeric_limits<std::uint64_t>::max() >> shift)) return false;
  out = n << shift;
  return true;
}

std::string byte_count_text(std::uint64_t bytes) {
  for (auto [shift, suffix] : {std::pair{30u, "G"}, std::pair{20u, "M"}, std::pair{10u, "K"}})
    if (bytes && bytes % (1ull << shift) == 0) return std::to_string(bytes >> shift) + suffix;
  return std::to_string(bytes);
}

bool parse_plain_integer(const std::string& v, std::uint64_t& out) {
  return !v.empty() && v.find_first_not_of("0123456789") == std::string::npos && v.size() <= 19 && parse_byte_count(v, out);
}

bool parse_plain_number(const std::string& v, double& out) {
  if (v.empty() || v.find_first_not_of("0123456789.") != std::string::npos) return false;
  char* end = nullptr;
  out = std::strtod(v.c_str(), &end);
  return end == v.c_str() + v.size();
}

bool parse_bit_rate(const std::string& text, double& bits_per_s) {
  if (text.empty() || !std::isdigit(static_cast<unsigned char>(text[0]))) return false;
  const std::size_t digits = text.find_first_not_of("0123456789.");
  double value = 0;
  if (!parse_plain_number(text.substr(0, digits), value)) return false;
  double unit = 1;
  if (digits != std::string::npos) {
    if (digits + 1 != text.size()) return false;
    switch (text[digits]) {
      case 'k': case 'K': unit = 1e3; break;
      case 'm': case 'M': unit = 1e6; break;
      case 'g': case 'G': unit = 1e9; break;
      default: return false;
    }
  }
  value *= unit;
  if (!(value > 0) || value > 1e13) return false;
  bits_per_s = value;
  return true;
}

ConfigResult parse_config(const Environment& env) {
  ConfigResult result;
  for (const auto& p : parameters()) result.config.source[p.name] = "default";
  for (const auto& [name, value] : env) {
    if (!starts_with(name, kPrefix) || starts_with(name, kUcxPrefix)) continue;
    const Parameter* param = find_parameter(name);
    if (!param) {
      std::ostringstream known;
      for (const auto& p : parameters()) known << (&p == &parameters().front() ? "" : ", ") << p.name;
      result.error = "unknown variable " + name + "=\"" + value + "\"; known: " + known.str() +
                     ", and OPTIREDUCE_UCX_* (passed to UCX)";
      return result;
    }
    if (!param->apply(result.config, value)) {
      result.error = name + "=\"" + value + "\" is not valid; accepted: " + param->info.accepted;
      return result;
    }
    result.config.source[name] = "environment";
  }
  return result;
}

Environment process_environment() {
  Environment env;
  for (char** e = environ; e && *e; ++e) {
    if (std::strncmp(*e, kPrefix, std::strlen(kPrefix)) != 0) continue;
    const char* eq = std::strchr(*e, '=');
    if (!eq) continue;
    env.emplace_back(std::string(*e, static_cast<std::size_t>(eq - *e)), std::string(eq + 1));
  }
  return env;
}

std::string Config::agreement_text() const {
  // The report path, trace and log level may differ per rank; everything else changes what runs.
  // The interfaces may differ per host and the pace per rank; the provider, FEC and
  // authentication shape the wire.
  std::ostringstream out;
  out << "mode=" << to_string(mode) << ";transport=" << to_string(transport) << ";min_bytes=" << min_bytes
      << ";chunk_bytes=" << chunk_bytes << ";timeout_ms=" << timeout_ms << ";watchdog_ms=" << watchdog_ms
      << ";loss_budget=" << loss_budget << ";fill=" << (fill_local ? "local" : "zero") << ";agree_fill=" << agree_fill
      << ";resend_rounds=" << resend_rounds
      << ";step_aside=" << step_aside << ";hierarchy=" << (hierarchy == HierarchyMode::off ? "off" : "auto")
      << ";calibration_calls=" << calibration_calls << ";hadamard=" << static_cast<int>(hadamard)
      << ";hadamard_block_log2=" << hadamard_block_log2 << ";auth=" << transports.udp.authenticate;
  if (transport == TransportKind::ofi) out << ";ofi_provider=" << transports.ofi.provider << ";fec=" << transports.ofi.fec_group;
  return out.str();
}

EngineOptions engine_options(const Config& config, bool hadamard_overlap) {
  EngineOptions o;
  o.chunk_elems = static_cast<std::uint32_t>(config.chunk_bytes / sizeof(float));
  o.timeout = std::chrono::milliseconds(config.timeout_ms);
  o.watchdog = std::chrono::milliseconds(config.watchdog_ms);
  o.calibration_calls = config.calibration_calls;
  o.loss_budget = config.loss_budget;
  o.fill = config.fill_local ? FillPolicy::local : FillPolicy::zero;
  o.agree_fill = config.agree_fill;
  o.resend_rounds = config.resend_rounds;
  o.step_aside = config.step_aside;
  o.hadamard = config.hadamard;
  o.hadamard_block_log2 = config.hadamard_block_log2;
  o.hadamard_overlap = hadamard_overlap && config.hadamard != HadamardMode::off;
  o.faults = config.faults;
  o.transport = config.transport;
  o.hierarchy = config.hierarchy;
  o.transport_settings = config.transports;
  o.transport_settings.ucx.chunk_bytes = config.chunk_bytes;
  o.transport_settings.udp.chunk_bytes = config.chunk_bytes;
  return o;
}

}  // namespace optireduce
