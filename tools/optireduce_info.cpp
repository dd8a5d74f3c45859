// optireduce-info: what OptiReduce would run with on this host, in the manner of ucx_info/fi_info:
// version, effective configuration and where each value came from, the UCX variables in force,
// the UCX transports, the kernel UDP transport's view of the host (interfaces, offloads, socket
// buffers and the sysctl that limits them) and libfabric datagram providers on offer, and the
// CPU topology; with --placement, the shape a call takes for that placement of ranks on hosts.
// No MPI: it reads the same environment MPI_Init would.
#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstdio>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "cli_errors.hpp"
#include "optireduce/engine/config/config.hpp"
#include "fabric_providers.hpp"
#include "placement_shape.hpp"
#include "optireduce/optireduce.h"
#include "optireduce/engine/report/report.hpp"
#include "optireduce/engine/report/topology.hpp"
#include "optireduce/engine/engine/transport_loader.hpp"

extern char** environ;

namespace {

using optireduce::json_escape;

struct Setting {
  std::string name, value, source, accepted, description;
};

struct Info {
  std::string version;
  std::vector<Setting> settings;
  std::vector<std::pair<std::string, std::string>> ucx_variables;
  std::vector<std::string> ucx_transports;
  std::vector<std::string> udp_host;  // the udp transport's view of this host, one line each
  std::vector<std::string> call_paths;
  optireduce::tools::FabricProviders fabric;
  optireduce::TopologySummary topology;
  bool has_shape = false;  // --placement given
  optireduce::tools::PlacementShape shape;
};

// The value in force (as the report states it) with what the parameter table says of it.
std::vector<Setting> settings_of(const optireduce::Environment& env, const optireduce::Config& config) {
  std::vector<Setting> out;
  const auto& infos = optireduce::parameters();
  const auto values = optireduce::effective_settings(env, config);
  for (std::size_t i = 0; i < infos.size(); ++i)
    out.push_back({values[i].name, values[i].value, values[i].source, infos[i].accepted, infos[i].description});
  return out;
}

// UCX_* applies to every UCX user; OPTIREDUCE_UCX_* only to the engine, and wins over UCX_*.
std::vector<std::pair<std::string, std::string>> ucx_variables() {
  std::vector<std::pair<std::string, std::string>> out;
  for (char** e = environ; e && *e; ++e) {
    if (std::strncmp(*e, "UCX_", 4) != 0 && std::strncmp(*e, "OPTIREDUCE_UCX_", 15) != 0) continue;
    const char* eq = std::strchr(*e, '=');
    if (eq) out.emplace_back(std::string(*e, static_cast<std::size_t>(eq - *e)), std::string(eq + 1));
  }
  std::sort(out.begin(), out.end());
  return out;
}

// What carries which calls under this configuration: the rules of engine/setup.cpp and
// deadlines/step_aside.hpp in words (the hosts of a job are known only inside it).
std::vector<std::string> call_paths(const optireduce::Config& c) {
  using optireduce::Mode;
  using optireduce::TransportKind;
  if (c.mode == Mode::off) return {"OPTIREDUCE_MODE=off: every MPI_Allreduce goes to the MPI untouched"};
  std::vector<std::string> out{"exact calls (reliable mode, calibration, fallback): UCX"};
  const std::string bounded = c.mode == Mode::reliable ? "(none: reliable mode) " : "";
  switch (c.transport) {
    case TransportKind::automatic:
      out.push_back("bounded calls " + bounded + "(auto): kernel UDP datagrams when the communicator's ranks are on "
                    "more than one host (host names differ), UCX when they are all on one");
      break;
    case TransportKind::ucx: out.push_back("bounded calls " + bounded + "(ucx): UCX"); break;
    case TransportKind::udp: out.push_back("bounded calls " + bounded + "(udp): kernel UDP datagrams, on one host too"); break;
    case TransportKind::ofi: out.push_back("bounded calls " + bounded + "(ofi): libfabric datagram endpoints"); break;
  }
  out.push_back(c.hierarchy == optireduce::HierarchyMode::off
                    ? "several ranks on some of several hosts: one flat TAR over every rank (OPTIREDUCE_HIERARCHY=off)"
                    : "several ranks on some of several hosts (auto): three stages, shared memory inside hosts and one "
                      "exchange per slice across them (not run by the engine yet; --placement 3,2,2 shows a shape)");
  if (!c.step_aside)
    out.push_back("one host: the engine carries every call (OPTIREDUCE_STEP_ASIDE=off)");
  else if (c.transport == TransportKind::udp || c.transport == TransportKind::ofi)
    out.push_back("one host: no step aside (a datagram transport is named: a network being emulated)");
  else if (c.faults.any())
    out.push_back("one host: no step aside (faults are injected)");
  else
    out.push_back("one host, UCX over shared memory: every call exact; per size class the faster of the MPI's "
                  "allreduce and the engine, measured in its first calls (held off shared memory, e.g. "
                  "OPTIREDUCE_UCX_TLS=tcp, UCX never steps aside)");
  return out;
}

std::string plural(int n, const char* word) {
  return std::to_string(n) + " " + word + (n == 1 ? "" : "s");
}

void print_text(const Info& info, bool verbose) {
  std::printf("# OptiReduce-MPI version %s\n#\n", info.version.c_str());
  std::printf("# Configuration (as MPI_Init would parse it from this environment)\n");
  std::size_t width = 0;
  for (const auto& s : info.settings) width = std::max(width, s.name.size());
  for (const auto& s : info.settings) {
    std::printf("#   %-*s = %-12s [%s]\n", static_cast<int>(width), s.name.c_str(), s.value.c_str(), s.source.c_str());
    if (verbose)
      std::printf("#   %-*s   accepted: %s\n#   %-*s   %s\n", static_cast<int>(width), "", s.accepted.c_str(),
                  static_cast<int>(width), "", s.description.c_str());
  }
  std::printf("#\n# What carries the calls\n");
  for (const auto& line : info.call_paths) std::printf("#   %s\n", line.c_str());
  if (info.has_shape) {
    const auto& sh = info.shape;
    std::printf("#\n# Shape of a call for placement %s (ranks per host)\n", sh.placement.c_str());
    std::printf("#   %s: %s\n", sh.hierarchical ? "three stages" : "flat", sh.reason.c_str());
    for (const auto& line : sh.slices) std::printf("#   %s\n", line.c_str());
    std::printf("#   busiest host link, out per call of B bytes: %.2f x B (flat TAR: %.2f x B)\n", sh.link_share,
                sh.flat_link_share);
    std::printf("#   reduce-scatters: %s; busiest host link, out per call of B bytes in even blocks: %.2f x B (flat: "
                "%.2f x B)\n",
                sh.reduce_scatter.c_str(), sh.scatter_link_share, sh.scatter_flat_link_share);
  }
  std::printf("#\n# UCX variables (OPTIREDUCE_UCX_* apply to the engine only and win over UCX_*)\n");
  if (info.ucx_variables.empty()) std::printf("#   (none set)\n");
  for (const auto& [name, value] : info.ucx_variables) std::printf("#   %s=%s\n", name.c_str(), value.c_str());
  std::printf("#\n# UCX transports available to the engine\n");
  if (info.ucx_transports.empty()) std::printf("#   (none: UCX could not start)\n");
  for (const auto& t : info.ucx_transports) std::printf("#   %s\n", t.c_str());
  std::printf("#\n# Kernel UDP transport (OPTIREDUCE_TRANSPORT=udp): interfaces, offloads, socket buffers\n");
  if (info.udp_host.empty()) std::printf("#   (unknown: the udp transport module could not be loaded)\n");
  for (const auto& line : info.udp_host) std::printf("#   %s\n", line.c_str());
  std::printf("#\n# libfabric datagram providers (FI_EP_DGRAM)\n");
  if (!info.fabric.error.empty())
    std::printf("#   (unknown: %s)\n", info.fabric.error.c_str());
  else if (info.fabric.providers.empty())
    std::printf("#   (none)\n");
  for (const auto& p : info.fabric.providers)
    std::printf("#   %-10s fabric %-24s domain %s\n", p.provider.c_str(), p.fabric.c_str(), p.domain.c_str());
  std::printf("#\n# Topology (hwloc)\n");
  const auto& t = info.topology;
  if (!t.error.empty()) {
    std::printf("#   (unknown: %s)\n", t.error.c_str());
  } else {
    std::printf("#   %s, %s, %s, %s\n", plural(t.packages, "package").c_str(), plural(t.cores, "core").c_str(),
                plural(t.hardware_threads, "hardware thread").c_str(), plural(t.numa_nodes, "NUMA node").c_str());
    std::printf("#   this process last ran on CPU %d, NUMA node %d\n", t.cpu_of_thread, t.numa_node_of_thread);
  }
}

std::string quoted(const std::string& s) {
  return "\"" + json_escape(s) + "\"";
}

void print_json(const Info& info) {
  std::string o = "{\n  \"version\": " + quoted(info.version) + ",\n  \"config\": [\n";
  for (std::size_t i = 0; i < info.settings.size(); ++i) {
    const auto& s = info.settings[i];
    o += "    {\"name\": " + quoted(s.name) + ", \"value\": " + quoted(s.value) + ", \"source\": " + quoted(s.source) +
         ", \"accepted\": " + quoted(s.accepted) + ", \"description\": " + quoted(s.description) + "}" +
         (i + 1 < info.settings.size() ? ",\n" : "\n");
  }
  o += "  ],\n  \"ucx_variables\": {";
  for (std::size_t i = 0; i < info.ucx_variables.size(); ++i)
    o += (i ? ", " : "") + quoted(info.ucx_variables[i].first) + ": " + quoted(info.ucx_variables[i].second);
  o += "},\n  \"ucx_transports\": [";
  for (std::size_t i = 0; i < info.ucx_transports.size(); ++i) o += (i ? ", " : "") + quoted(info.ucx_transports[i]);
  o += "],\n  \"udp_host\": [";
  for (std::size_t i = 0; i < info.udp_host.size(); ++i) o += (i ? ", " : "") + quoted(info.udp_host[i]);
  o += "],\n  \"call_paths\": [";
  for (std::size_t i = 0; i < info.call_paths.size(); ++i) o += (i ? ", " : "") + quoted(info.call_paths[i]);
  o += "],\n  \"fabric_dgram_providers\": [";
  for (std::size_t i = 0; i < info.fabric.providers.size(); ++i) {
    const auto& p = info.fabric.providers[i];
    o += std::string(i ? ", " : "") + "{\"provider\": " + quoted(p.provider) + ", \"fabric\": " + quoted(p.fabric) +
         ", \"domain\": " + quoted(p.domain) + "}";
  }
  o += "]";
  if (!info.fabric.error.empty()) o += ", \"fabric_error\": " + quoted(info.fabric.error);
  const auto& t = info.topology;
  o += ",\n  \"topology\": {\"packages\": " + std::to_string(t.packages) + ", \"cores\": " + std::to_string(t.cores) +
       ", \"hardware_threads\": " + std::to_string(t.hardware_threads) +
       ", \"numa_nodes\": " + std::to_string(t.numa_nodes) + ", \"cpu\": " + std::to_string(t.cpu_of_thread) +
       ", \"numa_node\": " + std::to_string(t.numa_node_of_thread);
  if (!t.error.empty()) o += ", \"error\": " + quoted(t.error);
  o += "}";
  if (info.has_shape) {
    const auto& sh = info.shape;
    o += ",\n  \"shape\": {\"placement\": " + quoted(sh.placement) + ", \"hierarchical\": " +
         (sh.hierarchical ? "true" : "false") + ", \"reason\": " + quoted(sh.reason) + ", \"slices\": [";
    for (std::size_t i = 0; i < sh.slices.size(); ++i) o += (i ? ", " : "") + quoted(sh.slices[i]);
    o += "], \"link_share\": " + std::to_string(sh.link_share) + ", \"flat_link_share\": " +
         std::to_string(sh.flat_link_share) + ", \"reduce_scatter\": " + quoted(sh.reduce_scatter) +
         ", \"scatter_link_share\": " + std::to_string(sh.scatter_link_share) + ", \"scatter_flat_link_share\": " +
         std::to_string(sh.scatter_flat_link_share) + "}";
  }
  o += "\n}\n";
  std::fputs(o.c_str(), stdout);
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{
      "Shows what OptiReduce-MPI would run with on this host: version, effective configuration, UCX "
      "transports, libfabric datagram providers and topology.",
      "optireduce-info"};
  bool json = false, verbose = false;
  std::string placement;
  app.add_flag("--json", json, "machine-readable output");
  app.add_option("--placement", placement,
                 "ranks per host, comma-separated (e.g. 3,2,2): the shape a call takes there "
                 "(OPTIREDUCE_HIERARCHY) and why");
  app.add_flag("-v,--verbose", verbose, "also show what each setting accepts and does");
  optireduce::tools::add_version_flag(app);
  optireduce::tools::use_single_line_errors(app);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return optireduce::tools::exit_code(app, e, true);
  }

  const auto env = optireduce::process_environment();
  const auto parsed = optireduce::parse_config(env);
  if (!parsed.ok()) {
    std::fprintf(stderr, "optireduce-info: configuration error: %s\n", parsed.error.c_str());
    return 1;
  }
  Info info;
  if (!placement.empty()) {
    info.has_shape = true;
    info.shape = optireduce::tools::describe_placement(placement, parsed.config.hierarchy);
    if (!info.shape.error.empty()) {
      std::fprintf(stderr, "optireduce-info: error: %s\n", info.shape.error.c_str());
      return 2;
    }
  }
  info.version = std::to_string(OPTIREDUCE_VERSION_MAJOR) + "." + std::to_string(OPTIREDUCE_VERSION_MINOR) + "." +
                 std::to_string(OPTIREDUCE_VERSION_PATCH);
  info.settings = settings_of(env, parsed.config);
  info.ucx_variables = ucx_variables();
  info.call_paths = call_paths(parsed.config);
  optireduce::Status loaded;
  if (const auto* ucx = optireduce::load_transport_module("ucx", loaded); ucx && ucx->describe_host)
    info.ucx_transports = ucx->describe_host(parsed.config.transports);
  if (const auto* udp = optireduce::load_transport_module("udp", loaded); udp && udp->describe_host)
    info.udp_host = udp->describe_host(parsed.config.transports);
  info.fabric = optireduce::tools::datagram_providers();
  info.topology = optireduce::read_topology();
  if (json)
    print_json(info);
  else
    print_text(info, verbose);
  return 0;
}
