#include "config.hpp"

#include <bit>
#include <cctype>
#include <cstdlib>
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
    case TransportKind::ofi: return "ofi";
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

bool plain_integer(const std::string& v, std::uint64_t& out) {
  return !v.empty() && v.find_first_not_of("0123456789") == std::string::npos && v.size() <= 19 &&
         parse_byte_count(v, out);
}

bool plain_number(const std::string& v, double& out) {
  if (v.empty() || v.find_first_not_of("0123456789.") != std::string::npos) return false;
  char* end = nullptr;
  out = std::strtod(v.c_str(), &end);
  return end == v.c_str() + v.size();
}

Apply fraction(double Config::*field) {
  return [field](Config& c, const std::string& v) {
    double x = 0;
    if (!plain_number(v, x) || x < 0 || x > 1) return false;
    c.*field = x;
    return true;
  };
}

const std::vector<Parameter>& table() {
  static const std::vector<Parameter> params = {
      {{"OPTIREDUCE_MODE", "bounded", "bounded, reliable, off",
        "bounded: every phase has an adaptive deadline, what is late is compensated and counted; "
        "reliable: exact TAR; off: every call goes to PMPI_Allreduce"},
       choice(&Config::mode, {{"bounded", Mode::bounded}, {"reliable", Mode::reliable}, {"off", Mode::off}})},
      {{"OPTIREDUCE_TRANSPORT", "ucx", "ucx, ofi",
        "transport of the engine: ucx (reliable; bounded calls give up at their deadline) or ofi "
        "(libfabric datagrams: unreliable, never retransmits; exact and calibration calls use "
        "PMPI_Allreduce)"},
       choice(&Config::transport, {{"ucx", TransportKind::ucx}, {"ofi", TransportKind::ofi}})},
      {{"OPTIREDUCE_OFI_PROVIDER", "(first datagram provider)", "a libfabric provider name offering FI_EP_DGRAM, e.g. udp",
        "ofi transport: the libfabric provider (fi_info -t FI_EP_DGRAM lists them)"},
       [](Config& c, const std::string& v) {
         if (v.empty() || v.find_first_of(" ;,") != std::string::npos) return false;
         c.ofi_provider = v;
         return true;
       }},
      {{"OPTIREDUCE_OFI_IFACE", "(auto)", "a network interface name, e.g. lo, eth0",
        "ofi transport: the interface (libfabric domain); auto: loopback when every rank of the "
        "communicator is on one host, otherwise the first other interface the provider lists"},
       [](Config& c, const std::string& v) {
         if (v.empty() || v.size() > 15 || v.find_first_of(" /;,") != std::string::npos) return false;
         c.ofi_iface = v;
         return true;
       }},
      {{"OPTIREDUCE_RATE", "(derived)", "bits per second with an optional k, M, G suffix (decimal), e.g. 800M, 10G",
        "ofi transport: pace of each rank's datagrams (token bucket), so one burst does not "
        "overflow a receiver's socket buffer; derived: from the calibration calls"},
       [](Config& c, const std::string& v) { return parse_bit_rate(v, c.rate_bits_per_s); }},
      {{"OPTIREDUCE_FEC", "off", "off, or a group size from 2 to 16",
        "ofi transport: after every group of that many datagrams to a peer, one parity datagram "
        "(XOR) that repairs one loss in the group without retransmission"},
       [](Config& c, const std::string& v) {
         std::uint64_t n = 0;
         if (v == "off") c.fec_group = 0;
         else if (plain_integer(v, n) && n >= 2 && n <= 16) c.fec_group = static_cast<unsigned>(n);
         else return false;
         return true;
       }},
      {{"OPTIREDUCE_MIN_BYTES", "1M", "0 to 1G bytes (suffix K, M, G allowed)",
        "smallest eligible MPI_Allreduce (count * 4 bytes) run by the engine; smaller ones go to "
        "PMPI_Allreduce"},
       byte_range(&Config::min_bytes, 0, 1ull << 30, 1)},
      {{"OPTIREDUCE_CHUNK_BYTES", "256K", "1K to 16M bytes, a multiple of 4",
        "pipelining unit: the payload of one message"},
       byte_range(&Config::chunk_bytes, 1u << 10, 16u << 20, 4)},
      {{"OPTIREDUCE_TIMEOUT_MS", "60000", "1 to 3600000",
        "hard cap on one engine call and on every deadline; an exact call that cannot finish by "
        "then fails with MPI_ERR_OTHER through the communicator's error handler instead of hanging"},
       [](Config& c, const std::string& v) {
         std::uint64_t n = 0;
         if (!plain_integer(v, n) || n < 1 || n > 3600000) return false;
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
      {{"OPTIREDUCE_TRACE", "(unset)", "a writable file path",
        "one line per engine call per rank (sequence, size, kind, deadlines, phase times, dropped "
        "entries), appended"},
       [](Config& c, const std::string& v) {
         if (v.empty()) return false;
         c.trace_path = v;
         return true;
       }},
      {{"OPTIREDUCE_LOSS_BUDGET", "0.10", "a fraction from 0 to 1",
        "when the recent bounded calls lose more than this share of entries on average (or one "
        "loses more than half), the next 16 calls on that communicator run exactly"},
       fraction(&Config::loss_budget)},
      {{"OPTIREDUCE_FILL", "zero", "zero, local",
        "all-gather chunks that never arrived: zero, or this rank's own contribution times the "
        "number of ranks (an unbiased guess)"},
       [](Config& c, const std::string& v) {
         if (v != "zero" && v != "local") return false;
         c.fill_local = v == "local";
         return true;
       }},
      {{"OPTIREDUCE_AGREE_FILL", "on", "on, off",
        "bounded calls end with the ranks telling each other which all-gather chunks they lack and "
        "filling the union on every rank, so replicas stay bitwise identical (zero fill only); off: "
        "each rank fills only what it lacks, replicas may drift (counted as divergent_calls)"},
       [](Config& c, const std::string& v) {
         if (v != "on" && v != "off") return false;
         c.agree_fill = v == "on";
         return true;
       }},
      {{"OPTIREDUCE_HADAMARD", "auto", "on, off, auto",
        "randomized Hadamard transform of bounded calls, which turns a lost chunk into small noise "
        "spread over many coordinates; auto: on while the communicator has recently lost data"},
       choice(&Config::hadamard, {{"off", 0}, {"on", 1}, {"auto", 2}})},
      {{"OPTIREDUCE_HADAMARD_BLOCK", "4096", "a power of two from 256 to 65536",
        "floats per Hadamard block"},
       [](Config& c, const std::string& v) {
         std::uint64_t n = 0;
         if (!plain_integer(v, n) || n < 256 || n > 65536 || (n & (n - 1)) != 0) return false;
         c.hadamard_block_log2 = static_cast<unsigned>(std::countr_zero(n));
         return true;
       }},
      {{"OPTIREDUCE_HADAMARD_OVERLAP", "auto", "on, off, auto",
        "encode and decode the Hadamard transform on a second thread while the calling thread "
        "drives the network; auto: on when this process may run on at least twice as many CPUs "
        "as the communicator has ranks on this host (a free core for each); results are the same"},
       choice(&Config::hadamard_overlap, {{"off", 0}, {"on", 1}, {"auto", 2}})},
      {{"OPTIREDUCE_CALIBRATION_CALLS", "20", "1 to 100000",
        "exact calls per communicator and size class (power-of-two byte range) whose times "
        "calibrate the deadlines"},
       [](Config& c, const std::string& v) {
         std::uint64_t n = 0;
         if (!plain_integer(v, n) || n < 1 || n > 100000) return false;
         c.calibration_calls = static_cast<unsigned>(n);
         return true;
       }},
      {{"OPTIREDUCE_FAULT_DROP", "0", "a fraction from 0 to 1",
        "testing: probability that a received chunk of a bounded call is discarded"},
       fraction(&Config::fault_drop)},
      {{"OPTIREDUCE_FAULT_DELAY", "(unset)", "RANK:MILLISECONDS:PROBABILITY, e.g. 2:500:0.1",
        "testing: that rank enters bounded calls late by that much with that probability"},
       [](Config& c, const std::string& v) {
         const auto a = v.find(':'), b = v.find(':', a == std::string::npos ? a : a + 1);
         if (a == std::string::npos || b == std::string::npos) return false;
         std::uint64_t rank = 0;
         double ms = 0, p = 0;
         if (!plain_integer(v.substr(0, a), rank) || rank > 1u << 24 || !plain_number(v.substr(a + 1, b - a - 1), ms) ||
             ms < 0 || ms > 3600000 || !plain_number(v.substr(b + 1), p) || p < 0 || p > 1)
           return false;
         c.fault_delay_rank = static_cast<int>(rank);
         c.fault_delay_ms = ms;
         c.fault_delay_probability = p;
         return true;
       }},
      {{"OPTIREDUCE_FAULT_SEED", "1", "a non-negative integer", "testing: seed of the fault injection"},
       [](Config& c, const std::string& v) { return plain_integer(v, c.fault_seed); }},
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

bool parse_bit_rate(const std::string& text, double& bits_per_s) {
  if (text.empty() || !std::isdigit(static_cast<unsigned char>(text[0]))) return false;
  std::size_t digits = text.find_first_not_of("0123456789.");
  double value = 0;
  if (!plain_number(text.substr(0, digits), value)) return false;
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
      << ";chunk_bytes=" << chunk_bytes << ";timeout_ms=" << timeout_ms << ";loss_budget=" << loss_budget
      << ";fill=" << (fill_local ? "local" : "zero") << ";agree_fill=" << agree_fill
      << ";calibration_calls=" << calibration_calls
      << ";hadamard=" << hadamard << ";hadamard_block_log2=" << hadamard_block_log2;
  // The interface may differ per host and the pace per rank; the provider and FEC shape the wire.
  if (transport == TransportKind::ofi) out << ";ofi_provider=" << ofi_provider << ";fec=" << fec_group;
  return out.str();
}

}  // namespace optireduce
