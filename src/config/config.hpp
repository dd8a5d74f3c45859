// Configuration: every OPTIREDUCE_* setting, parsed and validated once (at MPI_Init), from the
// parameter tables of config/tables.cpp (one per component) that the parser, optireduce-info,
// optireduce-run and the README share.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "optireduce/engine/config/defaults.hpp"
#include "optireduce/engine/config/engine_options.hpp"
#include "optireduce/engine/log.hpp"

namespace optireduce {

enum class Mode { bounded, reliable, off };
const char* to_string(Mode mode);

struct Config {
  Mode mode = Mode::bounded;
  TransportKind transport = TransportKind::automatic;
  std::uint64_t min_bytes = defaults::kMinBytes;
  std::uint64_t chunk_bytes = defaults::kChunkBytes;
  std::uint64_t timeout_ms = defaults::kTimeoutMs;
  std::uint64_t watchdog_ms = defaults::kWatchdogMs;
  std::string report_path;  // empty: no report
  std::string trace_path;   // empty: no trace
  LogLevel log_level = LogLevel::warn;
  double loss_budget = defaults::kLossBudget;
  bool fill_local = false;  // all-gather chunks that never arrived: false = zero, true = local
  bool agree_fill = true;   // ranks exchange their missing chunks and fill the union alike
  unsigned resend_rounds = defaults::kResendRounds;  // bounded calls over datagrams ask again for what was lost
  HierarchyMode hierarchy = HierarchyMode::automatic;
  bool step_aside = true;   // one host, shared memory: the faster of the MPI and the engine
  unsigned calibration_calls = defaults::kCalibrationCalls;
  HadamardMode hadamard = HadamardMode::automatic;
  unsigned hadamard_block_log2 = defaults::kHadamardBlockLog2;
  int hadamard_overlap = 2;  // 0 off, 1 on, 2 auto (on when a core is free for it)
  FaultOptions faults;
  TransportSettings transports;

  // Where each value came from: "default" or "environment", by variable name.
  std::map<std::string, std::string> source;

  // Every setting that must be identical on all ranks, in a fixed textual form.
  std::string agreement_text() const;
};

// What the engine of a communicator is told (overlap: decided by the caller for its host).
EngineOptions engine_options(const Config& config, bool hadamard_overlap);

struct ParameterInfo {
  std::string name;
  std::string default_text;
  std::string accepted;
  std::string description;
};

// Applies a value; false when it is not accepted.
using ApplyParameter = std::function<bool(Config&, const std::string&)>;
struct Parameter {
  ParameterInfo info;
  ApplyParameter apply;
};

// The tables of config/tables.cpp, one per component, in documentation order.
const std::vector<Parameter>& engine_parameters();
const std::vector<Parameter>& fault_parameters();
const std::vector<Parameter>& transport_parameters();
const std::vector<Parameter>& output_parameters();

// All of them, in documentation order.
const std::vector<ParameterInfo>& parameters();

struct ConfigResult {
  Config config;
  std::string error;  // empty on success; otherwise one line naming variable, value, accepted
  bool ok() const { return error.empty(); }
};

using Environment = std::vector<std::pair<std::string, std::string>>;

// Parses the OPTIREDUCE_* entries of `env` (other names are ignored). OPTIREDUCE_UCX_* entries
// belong to UCX and are accepted as they are.
ConfigResult parse_config(const Environment& env);

// The OPTIREDUCE_* entries of this process's environment.
Environment process_environment();

// Parses "123", "64K", "16M", "1G" (binary units). False on anything else or overflow.
bool parse_byte_count(const std::string& text, std::uint64_t& out);
// "1M" for 1 << 20: the shortest form parse_byte_count reads back.
std::string byte_count_text(std::uint64_t bytes);

// Parses a link rate in bits per second as tc writes it: "800M", "10G", "2.5G", "500k" (decimal
// units). False on anything else, zero, or more than 10 Tbit/s.
bool parse_bit_rate(const std::string& text, double& bits_per_s);

// Helpers the tables are written with.
bool parse_plain_integer(const std::string& v, std::uint64_t& out);
bool parse_plain_number(const std::string& v, double& out);

}  // namespace optireduce
