// Configuration: every OPTIREDUCE_* setting, parsed and validated once (at MPI_Init), from one
// table of parameters that the parser, optireduce-info and the README share.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "log.hpp"

namespace optireduce {

enum class Mode { bounded, reliable, off };
enum class TransportKind { ucx, ofi };

const char* to_string(Mode mode);
const char* to_string(TransportKind kind);
const char* to_string(LogLevel level);

struct Config {
  Mode mode = Mode::bounded;
  TransportKind transport = TransportKind::ucx;
  std::uint64_t min_bytes = 1u << 20;
  std::uint64_t chunk_bytes = 256u << 10;
  std::uint64_t timeout_ms = 60000;
  std::string report_path;  // empty: no report
  std::string trace_path;   // empty: no trace
  LogLevel log_level = LogLevel::warn;
  double loss_budget = 0.10;
  bool fill_local = false;  // all-gather chunks that never arrived: false = zero, true = local
  bool agree_fill = true;   // ranks exchange their missing chunks and fill the union alike
  unsigned calibration_calls = 20;
  int hadamard = 2;               // 0 off, 1 on, 2 auto
  unsigned hadamard_block_log2 = 12;
  int hadamard_overlap = 2;       // 0 off, 1 on, 2 auto (on when a core is free for it)
  double fault_drop = 0;
  int fault_delay_rank = -1;
  double fault_delay_ms = 0;
  double fault_delay_probability = 0;
  std::uint64_t fault_seed = 1;
  std::string ofi_provider;      // empty: the first datagram provider libfabric offers
  std::string ofi_iface;         // empty: loopback for a one-host job, else the first other interface
  double rate_bits_per_s = 0;    // datagram pacing; 0: derived
  unsigned fec_group = 0;        // datagrams per parity datagram; 0: no forward error correction

  // Where each value came from: "default" or "environment", by variable name.
  std::map<std::string, std::string> source;

  // Every setting that must be identical on all ranks, in a fixed textual form.
  std::string agreement_text() const;
};

struct ParameterInfo {
  const char* name;
  const char* default_text;
  const char* accepted;
  const char* description;
};

// The table, in documentation order.
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

// Parses a link rate in bits per second as tc writes it: "800M", "10G", "2.5G", "500k" (decimal
// units). False on anything else, zero, or more than 10 Tbit/s.
bool parse_bit_rate(const std::string& text, double& bits_per_s);

}  // namespace optireduce
