// The parameter tables, one per component: the engine, its fault injection, the transports,
// the outputs. A row is built by a helper per kind of setting (a choice of words, a range of
// integers or byte counts, a fraction, ...) that makes both the parser and the "accepted" text
// from the same values, so what the documentation says is accepted is what the parser accepts.
// Each numeric default is written once, in config/defaults.hpp, and printed from there; a choice's
// default is the word of its Config member's initializer.
#include <bit>
#include <cstdio>

#include "optireduce/engine/config/config.hpp"
#include "optireduce/engine/tar/resend.hpp"

namespace optireduce {
namespace {

// What a setting accepts: the text that tells a user and the parser, made together.
struct Accepts {
  std::string text;
  ApplyParameter apply;
};

Parameter setting(const char* name, std::string default_text, Accepts accepts, std::string description) {
  return {{name, std::move(default_text), std::move(accepts.text), std::move(description)}, std::move(accepts.apply)};
}

template <typename T>
using Words = std::vector<std::pair<const char*, T>>;

// One of a list of words, each standing for a value that `set` stores; accepted: the words, in
// the list's order.
template <typename T, typename Set>
Accepts one_of(Words<T> words, Set set) {
  std::string text;
  for (const auto& [word, value] : words) text += (text.empty() ? "" : ", ") + std::string(word);
  return {text, [words = std::move(words), set](Config& c, const std::string& v) {
            for (const auto& [word, value] : words)
              if (v == word) {
                set(c, value);
                return true;
              }
            return false;
          }};
}

// A Config member set by one of a list of words; its default is the word of the member's
// initializer (config.hpp).
template <typename T>
Parameter choice(const char* name, T Config::*field, Words<T> words, std::string description) {
  std::string default_text = "(none)";
  for (const auto& [word, value] : words)
    if (value == Config{}.*field) default_text = word;
  return setting(name, std::move(default_text), one_of(std::move(words), [field](Config& c, T value) { c.*field = value; }),
                 std::move(description));
}

Accepts byte_range(std::uint64_t Config::*field, std::uint64_t lo, std::uint64_t hi, std::uint64_t multiple) {
  return {byte_count_text(lo) + " to " + byte_count_text(hi) + " bytes" +
              (multiple > 1 ? ", a multiple of " + std::to_string(multiple) : "") + " (suffix K, M, G allowed)",
          [=](Config& c, const std::string& v) {
            std::uint64_t n = 0;
            if (!parse_byte_count(v, n) || n < lo || n > hi || n % multiple != 0) return false;
            c.*field = n;
            return true;
          }};
}

template <typename Field>
Accepts integer_range(Field Config::*field, std::uint64_t lo, std::uint64_t hi) {
  return {std::to_string(lo) + " to " + std::to_string(hi), [=](Config& c, const std::string& v) {
            std::uint64_t n = 0;
            if (!parse_plain_integer(v, n) || n < lo || n > hi) return false;
            c.*field = static_cast<Field>(n);
            return true;
          }};
}

template <typename Setter>
Accepts fraction(Setter set) {
  return {"a fraction from 0 to 1", [set](Config& c, const std::string& v) {
            double x = 0;
            if (!parse_plain_number(v, x) || x < 0 || x > 1) return false;
            set(c, x);
            return true;
          }};
}

Accepts path(std::string Config::*field) {
  return {"a writable file path", [field](Config& c, const std::string& v) {
            if (v.empty()) return false;
            c.*field = v;
            return true;
          }};
}

// A network interface name (Linux: at most 15 characters) for one datagram transport's settings,
// `example` shown beside it.
template <typename Settings>
Accepts interface_name(Settings TransportSettings::*transport, const char* example) {
  return {std::string("a network interface name, e.g. ") + example, [transport](Config& c, const std::string& v) {
            if (v.empty() || v.size() > 15 || v.find_first_of(" /;,") != std::string::npos) return false;
            (c.transports.*transport).iface = v;
            return true;
          }};
}

Accepts hadamard_block() {
  constexpr std::uint64_t lo = 256, hi = 65536;
  return {"a power of two from " + std::to_string(lo) + " to " + std::to_string(hi), [](Config& c, const std::string& v) {
            std::uint64_t n = 0;
            if (!parse_plain_integer(v, n) || n < lo || n > hi || (n & (n - 1)) != 0) return false;
            c.hadamard_block_log2 = static_cast<unsigned>(std::countr_zero(n));
            return true;
          }};
}

Accepts fault_delay() {
  return {"RANK:MILLISECONDS:PROBABILITY, e.g. 2:500:0.1", [](Config& c, const std::string& v) {
            const auto a = v.find(':'), b = v.find(':', a == std::string::npos ? a : a + 1);
            if (a == std::string::npos || b == std::string::npos) return false;
            std::uint64_t rank = 0;
            double ms = 0, p = 0;
            if (!parse_plain_integer(v.substr(0, a), rank) || rank > 1u << 24 ||
                !parse_plain_number(v.substr(a + 1, b - a - 1), ms) || ms < 0 || ms > 3600000 ||
                !parse_plain_number(v.substr(b + 1), p) || p < 0 || p > 1)
              return false;
            c.faults.delay_rank = static_cast<int>(rank);
            c.faults.delay_ms = ms;
            c.faults.delay_probability = p;
            return true;
          }};
}

Accepts fault_stall() {
  return {"RANK:MILLISECONDS, e.g. 0:800", [](Config& c, const std::string& v) {
            const auto a = v.find(':');
            std::uint64_t rank = 0;
            double ms = 0;
            if (a == std::string::npos || !parse_plain_integer(v.substr(0, a), rank) || rank > 1u << 24 ||
                !parse_plain_number(v.substr(a + 1), ms) || ms < 0 || ms > 3600000)
              return false;
            c.faults.stall_rank = static_cast<int>(rank);
            c.faults.stall_ms = ms;
            return true;
          }};
}

Accepts port_range() {
  constexpr std::uint64_t lowest = 1024, highest = 65535;
  return {"FIRST-LAST, from " + std::to_string(lowest) + " to " + std::to_string(highest) + ", e.g. 40000-40999",
          [](Config& c, const std::string& v) {
            const auto dash = v.find('-');
            std::uint64_t first = 0, last = 0;
            if (dash == std::string::npos || !parse_plain_integer(v.substr(0, dash), first) ||
                !parse_plain_integer(v.substr(dash + 1), last) || first < lowest || last > highest || first > last)
              return false;
            c.transports.udp.port_first = static_cast<std::uint16_t>(first);
            c.transports.udp.port_last = static_cast<std::uint16_t>(last);
            return true;
          }};
}

Accepts fec_group() {
  constexpr std::uint64_t lo = 2, hi = 16;
  return {"off, or a group size from " + std::to_string(lo) + " to " + std::to_string(hi),
          [](Config& c, const std::string& v) {
            std::uint64_t n = 0;
            if (v == "off") c.transports.ofi.fec_group = 0;
            else if (parse_plain_integer(v, n) && n >= lo && n <= hi) c.transports.ofi.fec_group = static_cast<unsigned>(n);
            else return false;
            c.transports.udp.fec_group = c.transports.ofi.fec_group;
            return true;
          }};
}

std::string fraction_text(double x) {
  char text[32];
  std::snprintf(text, sizeof text, "%.2f", x);
  return text;
}

}  // namespace

const std::vector<Parameter>& engine_parameters() {
  static const std::vector<Parameter> table = {
      choice("OPTIREDUCE_MODE", &Config::mode, {{"bounded", Mode::bounded}, {"reliable", Mode::reliable}, {"off", Mode::off}},
             "bounded: every phase has an adaptive deadline, what is late is compensated and counted; "
             "reliable: exact TAR; off: every call goes to PMPI_Allreduce"),
      setting("OPTIREDUCE_MIN_BYTES", byte_count_text(defaults::kMinBytes), byte_range(&Config::min_bytes, 0, 1ull << 30, 1),
              "smallest eligible MPI_Allreduce (count * 4 bytes) run by the engine; smaller ones go to PMPI_Allreduce"),
      setting("OPTIREDUCE_CHUNK_BYTES", byte_count_text(defaults::kChunkBytes),
              byte_range(&Config::chunk_bytes, 1u << 10, 16u << 20, 4),
              "pipelining unit: the payload of one message (cut to what one datagram holds)"),
      setting("OPTIREDUCE_TIMEOUT_MS", std::to_string(defaults::kTimeoutMs), integer_range(&Config::timeout_ms, 1, 3600000),
              "hard cap on every deadline of a bounded call"),
      setting("OPTIREDUCE_WATCHDOG_MS", std::to_string(defaults::kWatchdogMs), integer_range(&Config::watchdog_ms, 1, 86400000),
              "how long an exact wait (a call in reliable mode, calibration, connecting, the torch backend forming a "
              "group per slice) waits for a peer before the call fails with MPI_ERR_OTHER through the communicator's "
              "error handler instead of hanging"),
      setting("OPTIREDUCE_LOSS_BUDGET", fraction_text(defaults::kLossBudget),
              fraction([](Config& c, double x) { c.loss_budget = x; }),
              "when the recent bounded calls lose more than this share of entries on average (or one loses more than "
              "half), the next " + std::to_string(defaults::kReliableCallsAfterOverrun) +
                  " calls on that communicator run exactly"),
      choice("OPTIREDUCE_FILL", &Config::fill_local, {{"zero", false}, {"local", true}},
             "all-gather chunks that never arrived: zero, or this rank's own contribution times the number of ranks "
             "(an unbiased guess)"),
      choice("OPTIREDUCE_AGREE_FILL", &Config::agree_fill, {{"on", true}, {"off", false}},
             "bounded calls that may cut their all-gather (every one over udp and ofi; over UCX only where the loss budget "
             "allows a whole shard) end with the ranks telling each other which all-gather chunks they lack and filling "
             "the union on every rank, so replicas stay bitwise identical (zero fill only); off: each rank fills only what "
             "it lacks, replicas may drift (counted as divergent_calls)"),
      setting("OPTIREDUCE_RESEND_ROUNDS", std::to_string(defaults::kResendRounds),
              integer_range(&Config::resend_rounds, 0, kMaxResendRounds),
              "over a datagram transport (udp, ofi), how many times a bounded call's phase asks the senders again for the "
              "chunks it lacks, once every sender's last chunks are in and within the phase's deadline; 0: what the "
              "network loses stays lost"),
      choice("OPTIREDUCE_HADAMARD", &Config::hadamard,
             {{"on", HadamardMode::on}, {"off", HadamardMode::off}, {"auto", HadamardMode::automatic}},
             "randomized Hadamard transform of bounded allreduces, which turns a lost chunk into small noise spread over "
             "many coordinates (16-bit calls are transformed in float32 and still travel in 16 bits); auto: on while the "
             "communicator has recently lost data"),
      setting("OPTIREDUCE_HADAMARD_BLOCK", std::to_string(1u << defaults::kHadamardBlockLog2), hadamard_block(),
              "floats per Hadamard block"),
      choice("OPTIREDUCE_HADAMARD_OVERLAP", &Config::hadamard_overlap, {{"on", 1}, {"off", 0}, {"auto", 2}},
             "encode and decode the Hadamard transform on a second thread while the calling thread drives the network; "
             "auto: on when this process may run on at least twice as many CPUs as the communicator has ranks on this "
             "host (a free core for each); results are the same"),
      setting("OPTIREDUCE_CALIBRATION_CALLS", std::to_string(defaults::kCalibrationCalls),
              integer_range(&Config::calibration_calls, 1, 100000),
              "exact calls whose times calibrate the deadlines of a communicator's first size class (power-of-two byte "
              "range); each later size class, and each recalibration, takes the smaller of this and 8"),
  };
  return table;
}

const std::vector<Parameter>& fault_parameters() {
  static const std::vector<Parameter> table = {
      setting("OPTIREDUCE_FAULT_DROP", "0", fraction([](Config& c, double x) { c.faults.drop = x; }),
              "testing: probability that a received chunk of a bounded call is discarded"),
      setting("OPTIREDUCE_FAULT_DELAY", "(unset)", fault_delay(),
              "testing: that rank enters bounded calls late by that much with that probability"),
      setting("OPTIREDUCE_FAULT_STALL", "(unset)", fault_stall(),
              "testing: that rank stops for that long as it gives up on a call, before its peers hear of it"),
      setting("OPTIREDUCE_FAULT_SEED", std::to_string(defaults::kFaultSeed),
              {"a non-negative integer", [](Config& c, const std::string& v) { return parse_plain_integer(v, c.faults.seed); }},
              "testing: seed of the fault injection"),
  };
  return table;
}

const std::vector<Parameter>& transport_parameters() {
  static const std::vector<Parameter> table = {
      choice("OPTIREDUCE_TRANSPORT", &Config::transport,
             {{"auto", TransportKind::automatic}, {"ucx", TransportKind::ucx}, {"udp", TransportKind::udp},
              {"ofi", TransportKind::ofi}},
             "what carries bounded calls (exact ones always go over UCX): auto: kernel UDP datagrams when the "
             "communicator's ranks are on more than one host (host names differ), UCX within one host; udp or ofi "
             "(libfabric datagram endpoints, for verbs UD or EFA): always; ucx: UCX for every call. Datagrams are "
             "unreliable: a bounded call asks again for what was lost (OPTIREDUCE_RESEND_ROUNDS) and compensates what is "
             "still missing at its deadlines"),
      choice("OPTIREDUCE_STEP_ASIDE", &Config::step_aside, {{"auto", true}, {"off", false}},
             "auto: when every rank of the communicator is on one host and UCX reaches them all through shared "
             "memory (no fault injection), every call is exact (nothing there to bound), the first calls of each size "
             "class time the MPI's own allreduce against the engine, and the faster carries that size class's later "
             "calls (the report's mpi_calls; never a fallback); off: the engine carries every call, bounded ones too. "
             "Hold UCX off shared memory (OPTIREDUCE_UCX_TLS=tcp) to emulate a network on one host"),
      choice("OPTIREDUCE_HIERARCHY", &Config::hierarchy, {{"auto", HierarchyMode::automatic}, {"off", HierarchyMode::off}},
             "auto: where a communicator spans several hosts and some host holds two or more of its ranks, an "
             "allreduce (float32, float16 or bfloat16) runs in three stages: an exact reduce-scatter over shared memory "
             "inside each host (16-bit elements summed in float32 and rounded once there, so a 16-bit result is "
             "rounded twice, per host and across hosts, where the flat call rounds once), one TAR per "
             "slice across hosts among the ranks holding it (bounded or exact as the call is, with its own calibration, "
             "deadlines and resends), an exact all-gather inside each host (each host's link then carries 2·B·(H-1)/H, "
             "not about L times that); `optireduce-info --placement 3,2,2` shows the shape auto picks and why. "
             "A reduce-scatter (`MPI_Reduce_scatter_block`, `MPI_Reduce_scatter`) takes three stages too where each "
             "host's ranks are consecutive in the communicator and every host's ranks own part of the call (each "
             "host's link then carries B-B_h out, B·(H-1)/H for even blocks); elsewhere it stays flat and rank 0 logs "
             "why. The torch backend takes it as MPI jobs do, under mpirun and launched as "
             "torchrun launches (its gloo bootstrap splits a group per slice over the job's store). "
             "off: one flat TAR over every rank"),
      // The udp transport's own.
      setting("OPTIREDUCE_UDP_IFACE", "(auto)", interface_name(&TransportSettings::udp, "eth0"),
              "udp transport: the interface; auto: loopback when every rank of the communicator shares one network "
              "namespace, otherwise the interface whose subnet holds the peers' addresses"),
      setting("OPTIREDUCE_UDP_PORTS", "(any)", port_range(),
              "udp transport: bind within this port range (firewalled clusters); it may differ per rank (Open MPI: one "
              "app context per range, mpirun -x ... A : -x ... B, each context with every -x it needs)"),
      // The ofi transport's own.
      setting("OPTIREDUCE_OFI_PROVIDER", "(first datagram provider)",
              {"a libfabric provider name offering FI_EP_DGRAM, e.g. udp",
               [](Config& c, const std::string& v) {
                 if (v.empty() || v.find_first_of(" ;,") != std::string::npos) return false;
                 c.transports.ofi.provider = v;
                 return true;
               }},
              "ofi transport: the libfabric provider (fi_info -t FI_EP_DGRAM lists them)"),
      setting("OPTIREDUCE_OFI_IFACE", "(auto)", interface_name(&TransportSettings::ofi, "lo, eth0"),
              "ofi transport: the interface (libfabric domain); auto: loopback when every rank of the communicator is on "
              "one host, otherwise the first other interface the provider lists"),
      // Both datagram transports'.
      setting("OPTIREDUCE_AUTH", "on",
              one_of(Words<bool>{{"on", true}, {"off", false}},
                     [](Config& c, bool on) { c.transports.udp.authenticate = c.transports.ofi.authenticate = on; }),
              "datagram transports: a keyed tag (UMAC-64) over header and payload of every datagram, so nobody outside "
              "the job can inject data; off for trusted fabrics"),
      setting("OPTIREDUCE_RATE", "(derived)",
              {"bits per second with an optional k, M, G suffix (decimal), e.g. 800M, 10G",
               [](Config& c, const std::string& v) {
                 double rate = 0;
                 if (!parse_bit_rate(v, rate)) return false;
                 c.transports.udp.rate_bits_per_s = c.transports.ofi.rate_bits_per_s = rate;
                 return true;
               }},
              "datagram transports: pace of each rank's datagrams (token bucket), so one burst does not overflow a "
              "receiver's socket buffer; derived: from the calibration calls"),
      setting("OPTIREDUCE_FEC", "off", fec_group(),
              "datagram transports: after every group of that many datagrams to a peer, one parity datagram (XOR) that "
              "repairs one loss in the group without retransmission"),
  };
  return table;
}

const std::vector<Parameter>& output_parameters() {
  static const std::vector<Parameter> table = {
      setting("OPTIREDUCE_REPORT", "(unset)", path(&Config::report_path),
              "at MPI_Finalize rank 0 writes the JSON report of all ranks there (checked writable at MPI_Init)"),
      setting("OPTIREDUCE_TRACE", "(unset)", path(&Config::trace_path),
              "one line per engine call per rank (sequence, size, kind, deadlines, phase times, dropped entries), "
              "appended (opened at MPI_Init)"),
      choice("OPTIREDUCE_LOG", &Config::log_level,
             {{"error", LogLevel::error}, {"warn", LogLevel::warn}, {"info", LogLevel::info}, {"debug", LogLevel::debug}},
             "stderr verbosity; at warn, rank 0 prints one line at MPI_Finalize when entries were compensated, a "
             "communicator fell back to exact calls or replicas diverged (calls, time in allreduce, the wait the "
             "deadlines saved); info prints it always; error silences it"),
  };
  return table;
}

}  // namespace optireduce
