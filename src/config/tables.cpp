// The parameter tables, one per component: the engine, its fault injection, the transports,
// the outputs. Each
// default is written once, in config/defaults.hpp (or as the Config member's initializer for
// choices), and printed from there.
#include <bit>
#include <cstdio>

#include "optireduce/engine/config/config.hpp"
#include "optireduce/engine/tar/resend.hpp"

namespace optireduce {
namespace {

template <typename E>
ApplyParameter choice(E Config::*field, std::vector<std::pair<const char*, E>> values) {
  return [field, values](Config& c, const std::string& v) {
    for (const auto& [name, value] : values)
      if (v == name) {
        c.*field = value;
        return true;
      }
    return false;
  };
}

ApplyParameter byte_range(std::uint64_t Config::*field, std::uint64_t lo, std::uint64_t hi, std::uint64_t multiple) {
  return [=](Config& c, const std::string& v) {
    std::uint64_t n = 0;
    if (!parse_byte_count(v, n) || n < lo || n > hi || n % multiple != 0) return false;
    c.*field = n;
    return true;
  };
}

template <typename Field>
ApplyParameter integer_range(Field Config::*field, std::uint64_t lo, std::uint64_t hi) {
  return [=](Config& c, const std::string& v) {
    std::uint64_t n = 0;
    if (!parse_plain_integer(v, n) || n < lo || n > hi) return false;
    c.*field = static_cast<Field>(n);
    return true;
  };
}

template <typename Setter>
ApplyParameter fraction(Setter set) {
  return [set](Config& c, const std::string& v) {
    double x = 0;
    if (!parse_plain_number(v, x) || x < 0 || x > 1) return false;
    set(c, x);
    return true;
  };
}

// One of two words: `yes` sets the field, `no` clears it.
ApplyParameter either(bool Config::*field, const char* yes, const char* no) {
  return [=](Config& c, const std::string& v) {
    if (v != yes && v != no) return false;
    c.*field = v == yes;
    return true;
  };
}

ApplyParameter on_off(bool Config::*field) { return either(field, "on", "off"); }

ApplyParameter path(std::string Config::*field) {
  return [field](Config& c, const std::string& v) {
    if (v.empty()) return false;
    c.*field = v;
    return true;
  };
}

bool interface_name(const std::string& v) { return !v.empty() && v.size() <= 15 && v.find_first_of(" /;,") == std::string::npos; }

bool apply_fault_delay(Config& c, const std::string& v) {
  const auto a = v.find(':'), b = v.find(':', a == std::string::npos ? a : a + 1);
  if (a == std::string::npos || b == std::string::npos) return false;
  std::uint64_t rank = 0;
  double ms = 0, p = 0;
  if (!parse_plain_integer(v.substr(0, a), rank) || rank > 1u << 24 || !parse_plain_number(v.substr(a + 1, b - a - 1), ms) ||
      ms < 0 || ms > 3600000 || !parse_plain_number(v.substr(b + 1), p) || p < 0 || p > 1)
    return false;
  c.faults.delay_rank = static_cast<int>(rank);
  c.faults.delay_ms = ms;
  c.faults.delay_probability = p;
  return true;
}

bool apply_port_range(Config& c, const std::string& v) {
  const auto dash = v.find('-');
  std::uint64_t first = 0, last = 0;
  if (dash == std::string::npos || !parse_plain_integer(v.substr(0, dash), first) ||
      !parse_plain_integer(v.substr(dash + 1), last) || first < 1024 || last > 65535 || first > last)
    return false;
  c.transports.udp.port_first = static_cast<std::uint16_t>(first);
  c.transports.udp.port_last = static_cast<std::uint16_t>(last);
  return true;
}

std::string fraction_text(double x) {
  char text[32];
  std::snprintf(text, sizeof text, "%.2f", x);
  return text;
}

}  // namespace

const std::vector<Parameter>& engine_parameters() {
  static const std::vector<Parameter> table = {
      {{"OPTIREDUCE_MODE", "bounded", "bounded, reliable, off",
        "bounded: every phase has an adaptive deadline, what is late is compensated and counted; "
        "reliable: exact TAR; off: every call goes to PMPI_Allreduce"},
       choice(&Config::mode, {{"bounded", Mode::bounded}, {"reliable", Mode::reliable}, {"off", Mode::off}})},
      {{"OPTIREDUCE_MIN_BYTES", byte_count_text(defaults::kMinBytes), "0 to 1G bytes (suffix K, M, G allowed)",
        "smallest eligible MPI_Allreduce (count * 4 bytes) run by the engine; smaller ones go to PMPI_Allreduce"},
       byte_range(&Config::min_bytes, 0, 1ull << 30, 1)},
      {{"OPTIREDUCE_CHUNK_BYTES", byte_count_text(defaults::kChunkBytes), "1K to 16M bytes, a multiple of 4",
        "pipelining unit: the payload of one message (cut to what one datagram holds)"},
       byte_range(&Config::chunk_bytes, 1u << 10, 16u << 20, 4)},
      {{"OPTIREDUCE_TIMEOUT_MS", std::to_string(defaults::kTimeoutMs), "1 to 3600000",
        "hard cap on every deadline of a bounded call"},
       integer_range(&Config::timeout_ms, 1, 3600000)},
      {{"OPTIREDUCE_WATCHDOG_MS", std::to_string(defaults::kWatchdogMs), "1 to 86400000",
        "how long an exact wait (a call in reliable mode, calibration, connecting) waits for a peer before the call "
        "fails with MPI_ERR_OTHER through the communicator's error handler instead of hanging"},
       integer_range(&Config::watchdog_ms, 1, 86400000)},
      {{"OPTIREDUCE_LOSS_BUDGET", fraction_text(defaults::kLossBudget), "a fraction from 0 to 1",
        "when the recent bounded calls lose more than this share of entries on average (or one loses more than half), "
        "the next " + std::to_string(defaults::kReliableCallsAfterOverrun) + " calls on that communicator run exactly"},
       fraction([](Config& c, double x) { c.loss_budget = x; })},
      {{"OPTIREDUCE_FILL", "zero", "zero, local",
        "all-gather chunks that never arrived: zero, or this rank's own contribution times the number of ranks "
        "(an unbiased guess)"},
       either(&Config::fill_local, "local", "zero")},
      {{"OPTIREDUCE_AGREE_FILL", "on", "on, off",
        "bounded calls that may cut their all-gather (every one over udp and ofi; over UCX only where the loss budget "
        "allows a whole shard) end with the ranks telling each other which all-gather chunks they lack and filling the "
        "union on every rank, so replicas stay bitwise identical (zero fill only); off: each rank fills only what it lacks, "
        "replicas may drift (counted as divergent_calls)"},
       on_off(&Config::agree_fill)},
      {{"OPTIREDUCE_RESEND_ROUNDS", std::to_string(defaults::kResendRounds), "0 to " + std::to_string(kMaxResendRounds),
        "over a datagram transport (udp, ofi), how many times a bounded call's phase asks the senders again for the "
        "chunks it lacks, once every sender's last chunks are in and within the phase's deadline; 0: what the network "
        "loses stays lost"},
       integer_range(&Config::resend_rounds, 0, kMaxResendRounds)},
      {{"OPTIREDUCE_HADAMARD", "auto", "on, off, auto",
        "randomized Hadamard transform of bounded allreduces, which turns a lost chunk into small noise spread over "
        "many coordinates (16-bit calls are transformed in float32 and still travel in 16 bits); auto: on while the "
        "communicator has recently lost data"},
       choice(&Config::hadamard, {{"off", HadamardMode::off}, {"on", HadamardMode::on}, {"auto", HadamardMode::automatic}})},
      {{"OPTIREDUCE_HADAMARD_BLOCK", std::to_string(1u << defaults::kHadamardBlockLog2), "a power of two from 256 to 65536",
        "floats per Hadamard block"},
       [](Config& c, const std::string& v) {
         std::uint64_t n = 0;
         if (!parse_plain_integer(v, n) || n < 256 || n > 65536 || (n & (n - 1)) != 0) return false;
         c.hadamard_block_log2 = static_cast<unsigned>(std::countr_zero(n));
         return true;
       }},
      {{"OPTIREDUCE_HADAMARD_OVERLAP", "auto", "on, off, auto",
        "encode and decode the Hadamard transform on a second thread while the calling thread drives the network; "
        "auto: on when this process may run on at least twice as many CPUs as the communicator has ranks on this "
        "host (a free core for each); results are the same"},
       choice(&Config::hadamard_overlap, {{"off", 0}, {"on", 1}, {"auto", 2}})},
      {{"OPTIREDUCE_CALIBRATION_CALLS", std::to_string(defaults::kCalibrationCalls), "1 to 100000",
        "exact calls whose times calibrate the deadlines of a communicator's first size class (power-of-two byte "
        "range); each later size class, and each recalibration, takes the smaller of this and 8"},
       integer_range(&Config::calibration_calls, 1, 100000)},
  };
  return table;
}

const std::vector<Parameter>& fault_parameters() {
  static const std::vector<Parameter> table = {
      {{"OPTIREDUCE_FAULT_DROP", "0", "a fraction from 0 to 1",
        "testing: probability that a received chunk of a bounded call is discarded"},
       fraction([](Config& c, double x) { c.faults.drop = x; })},
      {{"OPTIREDUCE_FAULT_DELAY", "(unset)", "RANK:MILLISECONDS:PROBABILITY, e.g. 2:500:0.1",
        "testing: that rank enters bounded calls late by that much with that probability"},
       apply_fault_delay},
      {{"OPTIREDUCE_FAULT_SEED", std::to_string(defaults::kFaultSeed), "a non-negative integer",
        "testing: seed of the fault injection"},
       [](Config& c, const std::string& v) { return parse_plain_integer(v, c.faults.seed); }},
  };
  return table;
}

const std::vector<Parameter>& transport_parameters() {
  static const std::vector<Parameter> table = {
      {{"OPTIREDUCE_TRANSPORT", "auto", "auto, ucx, udp, ofi",
        "what carries bounded calls (exact ones always go over UCX): auto: kernel UDP datagrams when the "
        "communicator's ranks are on more than one host (host names differ), UCX within one host; udp or ofi "
        "(libfabric datagram endpoints, for verbs UD or EFA): always; ucx: UCX for every call. Datagrams are "
        "unreliable: a bounded call asks again for what was lost (OPTIREDUCE_RESEND_ROUNDS) and compensates what is "
        "still missing at its deadlines"},
       choice(&Config::transport, {{"auto", TransportKind::automatic}, {"ucx", TransportKind::ucx},
                                   {"udp", TransportKind::udp}, {"ofi", TransportKind::ofi}})},
      {{"OPTIREDUCE_STEP_ASIDE", "auto", "auto, off",
        "auto: when every rank of the communicator is on one host and UCX reaches them all through shared "
        "memory (no fault injection), every call is exact (nothing there to bound), the first calls of each size "
        "class time the MPI's own allreduce against the engine, and the faster carries that size class's later "
        "calls (the report's mpi_calls; never a fallback); off: the engine carries every call, bounded ones too. Hold UCX off shared memory (OPTIREDUCE_UCX_TLS=tcp) to "
        "emulate a network on one host"},
       either(&Config::step_aside, "auto", "off")},
      {{"OPTIREDUCE_HIERARCHY", "auto", "auto, off",
        "auto: where a communicator spans several hosts and some host holds two or more of its ranks, a float32 "
        "allreduce runs in three stages: an exact reduce-scatter over shared memory inside each host, one TAR per slice "
        "across hosts among the ranks holding it (bounded or exact as the call is, with its own calibration, deadlines "
        "and resends), an exact all-gather inside each host (each host's link then carries 2·B·(H-1)/H, not about L "
        "times that); `optireduce-info --placement 3,2,2` shows the shape auto picks and why. Float16/bfloat16 "
        "allreduces and reduce-scatters stay flat; so does everything under the torch backend (its bootstrap cannot "
        "split a group yet). off: one flat TAR over every rank"},
       choice(&Config::hierarchy, {{"auto", HierarchyMode::automatic}, {"off", HierarchyMode::off}})},
      {{"OPTIREDUCE_UDP_IFACE", "(auto)", "a network interface name, e.g. eth0",
        "udp transport: the interface; auto: loopback when every rank of the communicator shares one network "
        "namespace, otherwise the interface whose subnet holds the peers' addresses"},
       [](Config& c, const std::string& v) { return interface_name(v) && (c.transports.udp.iface = v, true); }},
      {{"OPTIREDUCE_UDP_PORTS", "(any)", "FIRST-LAST, from 1024 to 65535, e.g. 40000-40999",
        "udp transport: bind within this port range (firewalled clusters); it may differ per rank (Open MPI: one app "
        "context per range, mpirun -x ... A : -x ... B, each context with every -x it needs)"},
       apply_port_range},
      {{"OPTIREDUCE_AUTH", "on", "on, off",
        "datagram transports: a keyed tag (UMAC-64) over header and payload of every datagram, so nobody outside the "
        "job can inject data; off for trusted fabrics"},
       [](Config& c, const std::string& v) {
         if (v != "on" && v != "off") return false;
         c.transports.udp.authenticate = c.transports.ofi.authenticate = v == "on";
         return true;
       }},
      {{"OPTIREDUCE_RATE", "(derived)", "bits per second with an optional k, M, G suffix (decimal), e.g. 800M, 10G",
        "datagram transports: pace of each rank's datagrams (token bucket), so one burst does not overflow a "
        "receiver's socket buffer; derived: from the calibration calls"},
       [](Config& c, const std::string& v) {
         double rate = 0;
         if (!parse_bit_rate(v, rate)) return false;
         c.transports.udp.rate_bits_per_s = c.transports.ofi.rate_bits_per_s = rate;
         return true;
       }},
      {{"OPTIREDUCE_OFI_PROVIDER", "(first datagram provider)", "a libfabric provider name offering FI_EP_DGRAM, e.g. udp",
        "ofi transport: the libfabric provider (fi_info -t FI_EP_DGRAM lists them)"},
       [](Config& c, const std::string& v) {
         if (v.empty() || v.find_first_of(" ;,") != std::string::npos) return false;
         c.transports.ofi.provider = v;
         return true;
       }},
      {{"OPTIREDUCE_OFI_IFACE", "(auto)", "a network interface name, e.g. lo, eth0",
        "ofi transport: the interface (libfabric domain); auto: loopback when every rank of the communicator is on "
        "one host, otherwise the first other interface the provider lists"},
       [](Config& c, const std::string& v) { return interface_name(v) && (c.transports.ofi.iface = v, true); }},
      {{"OPTIREDUCE_FEC", "off", "off, or a group size from 2 to 16",
        "datagram transports: after every group of that many datagrams to a peer, one parity datagram (XOR) that "
        "repairs one loss in the group without retransmission"},
       [](Config& c, const std::string& v) {
         std::uint64_t n = 0;
         if (v == "off") c.transports.ofi.fec_group = 0;
         else if (parse_plain_integer(v, n) && n >= 2 && n <= 16) c.transports.ofi.fec_group = static_cast<unsigned>(n);
         else return false;
         c.transports.udp.fec_group = c.transports.ofi.fec_group;
         return true;
       }},
  };
  return table;
}

const std::vector<Parameter>& output_parameters() {
  static const std::vector<Parameter> table = {
      {{"OPTIREDUCE_REPORT", "(unset)", "a writable file path",
        "at MPI_Finalize rank 0 writes the JSON report of all ranks there (checked writable at MPI_Init)"},
       path(&Config::report_path)},
      {{"OPTIREDUCE_TRACE", "(unset)", "a writable file path",
        "one line per engine call per rank (sequence, size, kind, deadlines, phase times, dropped entries), appended "
        "(opened at MPI_Init)"},
       path(&Config::trace_path)},
      {{"OPTIREDUCE_LOG", "warn", "error, warn, info, debug",
        "stderr verbosity; at warn, rank 0 prints one line at MPI_Finalize when entries were compensated, a "
        "communicator fell back to exact calls or replicas diverged (calls, time in allreduce, the wait the deadlines "
        "saved); info prints it always; error silences it"},
       choice(&Config::log_level,
              {{"error", LogLevel::error}, {"warn", LogLevel::warn}, {"info", LogLevel::info}, {"debug", LogLevel::debug}})},
  };
  return table;
}

}  // namespace optireduce
