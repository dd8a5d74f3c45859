#include "config.hpp"

#include <cctype>
#include <cstring>
#include <functional>
#include <limits>
#include <sstream>

extern char** environ;

namespace optireduce {

const char* to_string(Mode mode) {
  switch (mode) {
    case Mode::bounded: return "bounded";
    case Mode::reliable: return "reliable";
    case Mode::off: return "off";
  }
  return "?";
}
const char* to_string(TransportKind kind) {
  switch (kind) {
    case TransportKind::ucx: return "ucx";
  }
  return "?";
}
const char* to_string(LogLevel level) {
  switch (level) {
    case LogLevel::error: return "error";
    case LogLevel::warn: return "warn";
    case LogLevel::info: return "info";
    case LogLevel::debug: return "debug";
  }
  return "?";
}

namespace {

constexpr const char* kPrefix = "OPTIREDUCE_";
constexpr const char* kUcxPrefix = "OPTIREDUCE_UCX_";

// Applies a value; returns false when it is not accepted.
using Apply = std::function<bool(Config&, const std::string&)>;

struct Parameter {
  ParameterInfo info;
  Apply apply;
};

template <typename E>
Apply choice(E Config::*field, std::vector<std::pair<const char*, E>> values) {
  return [field, values](Config& c, const std::string& v) {
    for (const auto& [name, value] : values)
      if (v == name) {
        c.*field = value;
        return true;
      }
    return false;
  };
}

Apply byte_range(std::uint64_t Config::*field, std::uint64_t lo, std::uint64_t hi, std::uint64_t multiple) {
  return [=](Config& c, const std::string& v) {
    std::uint64_t n = 0;
    if (!parse_byte_count(v, n) || n < lo || n > hi || n % multiple != 0) return false;
    c.*field = n;
    return true;
  };
}

const std::vector<Parameter>& table() {
  static const std::vector<Parameter> params = {
      {{"OPTIREDUCE_MODE", "bounded", "bounded, reliable, off",
        "bounded: deadline-bounded TAR (until the bounded-time engine lands it runs exactly, like "
        "reliable); reliable: exact TAR over the reliable transport; off: every call goes to "
        "PMPI_Allreduce"},
       choice(&Config::mode, {{"bounded", Mode::bounded}, {"reliable", Mode::reliable}, {"off", Mode::off}})},
      {{"OPTIREDUCE_TRANSPORT", "ucx", "ucx", "transport of the engine"},
       choice(&Config::transport, {{"ucx", TransportKind::ucx}})},
      {{"OPTIREDUCE_MIN_BYTES", "1M", "0 to 1G bytes (suffix K, M, G allowed)",
        "smallest eligible MPI_Allreduce (count * 4 bytes) run by the engine; smaller ones go to "
        "PMPI_Allreduce"},
       byte_range(&Config::min_bytes, 0, 1ull << 30, 1)},
      {{"OPTIREDUCE_CHUNK_BYTES", "256K", "1K to 16M bytes, a multiple of 4",
        "pipelining unit: the payload of one message"},
       byte_range(&Config::chunk_bytes, 1u << 10, 16u << 20, 4)},
      {{"OPTIREDUCE_TIMEOUT_MS", "60000", "1 to 3600000",
        "hard cap on one engine call; an exact call that cannot finish by then fails with "
        "MPI_ERR_OTHER through the communicator's error handler instead of hanging"},
       [](Config& c, const std::string& v) {
         std::uint64_t n = 0;
         if (v.empty() || v.find_first_not_of("0123456789") != std::string::npos || !parse_byte_count(v, n) ||
             n < 1 || n > 3600000)
           return false;
         c.timeout_ms = n;
         return true;
       }},
      {{"OPTIREDUCE_REPORT", "(unset)", "a writable file path",
        "at MPI_Finalize rank 0 writes the JSON report of all ranks there"},
       [](Config& c, const std::string& v) {
         if (v.empty()) return false;
         c.report_path = v;
         return true;
       }},
      {{"OPTIREDUCE_LOG", "warn", "error, warn, info, debug",
        "stderr verbosity; info adds a summary from rank 0 at MPI_Finalize"},
       choice(&Config::log_level,
              {{"error", LogLevel::error}, {"warn", LogLevel::warn}, {"info", LogLevel::info}, {"debug", LogLevel::debug}})},
  };
  return params;
}

bool starts_with(const std::string& s, const char* prefix) { return s.rfind(prefix, 0) == 0; }

}  // namespace

const std::vector<ParameterInfo>& parameters() {
  static const std::vector<ParameterInfo> infos = [] {
    std::vector<ParameterInfo> v;
    for (const auto& p : table()) v.push_back(p.info);
    return v;
  }();
  return infos;
}

bool parse_byte_count(const std::string& text, std::uint64_t& out) {
  if (text.empty() || !std::isdigit(static_cast<unsigned char>(text[0]))) return false;
  std::size_t i = 0;
  std::uint64_t n = 0;
  while (i < text.size() && std::isdigit(static_cast<unsigned char>(text[i]))) {
    std::uint64_t d = static_cast<std::uint64_t>(text[i] - '0');
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

ConfigResult parse_config(const Environment& env) {
  ConfigResult result;
  for (const auto& p : table()) result.config.source[p.info.name] = "default";
  for (const auto& [name, value] : env) {
    if (!starts_with(name, kPrefix) || starts_with(name, kUcxPrefix)) continue;
    const Parameter* param = nullptr;
    for (const auto& p : table())
      if (name == p.info.name) param = &p;
    if (!param) {
      std::ostringstream known;
      for (const auto& p : table()) known << (&p == &table().front() ? "" : ", ") << p.info.name;
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
  // The report path and log level may differ per rank; everything else changes what runs.
  std::ostringstream out;
  out << "mode=" << to_string(mode) << ";transport=" << to_string(transport) << ";min_bytes=" << min_bytes
      << ";chunk_bytes=" << chunk_bytes << ";timeout_ms=" << timeout_ms;
  return out.str();
}

}  // namespace optireduce
