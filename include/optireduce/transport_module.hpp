// How the library loads a transport: each transport is a shared object of its own
// (liboptireduce-transport-<name>.so, beside the library), opened with dlopen on first use, so a
// process that preloads the library but never calls MPI_Init loads neither UCX nor libfabric.
// A module exports one C symbol, kTransportModuleSymbol, returning its TransportModule.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "optireduce/log.hpp"
#include "optireduce/status.hpp"
#include "optireduce/transport.hpp"

namespace optireduce {

// Settings of each transport, validated by the library at MPI_Init (config), read by the module.
struct UcxSettings {
  std::size_t chunk_bytes = 0;  // largest engine payload: sizes UCX's TCP segments
};

struct UdpSettings {
  std::string iface;             // empty: chosen from the peers' addresses
  std::uint16_t port_first = 0;  // 0: any port; else bind within [port_first, port_last]
  std::uint16_t port_last = 0;
  bool authenticate = true;      // keyed tag over header and payload of every datagram
  double rate_bits_per_s = 0;    // 0: paced from what calibration measured
  std::size_t chunk_bytes = 0;   // largest engine payload
  unsigned fec_group = 0;        // data datagrams per parity datagram; 0: none
};

struct OfiSettings {
  std::string provider;         // empty: the first provider offering FI_EP_DGRAM
  std::string iface;            // empty: loopback when every rank shares it, else another
  double rate_bits_per_s = 0;
  unsigned fec_group = 0;       // datagrams per parity datagram; 0: none
  bool authenticate = true;
};

struct TransportSettings {
  UcxSettings ucx;
  UdpSettings udp;
  OfiSettings ofi;
};

// What the library hands a module: where its log lines go.
struct TransportHost {
  int log_level = static_cast<int>(LogLevel::warn);
  void (*write_log)(LogLevel, const char*) = nullptr;
};

inline constexpr std::uint32_t kTransportAbiVersion = 1;
inline constexpr const char* kTransportModuleSymbol = "optireduce_transport_module_v1";

struct TransportModule {
  std::uint32_t abi_version = kTransportAbiVersion;
  const char* name = "";  // "ucx", "udp", "ofi"
  // Connects the module's logging to the library's; called once after dlopen.
  void (*attach)(const TransportHost& host) = nullptr;
  // A transport ready for connect(), or null with `status` saying why.
  std::unique_ptr<Transport> (*create)(const TransportSettings& settings, Status& status) = nullptr;
  // What this transport could use on this host, one entry per line (for optireduce-info).
  std::vector<std::string> (*describe_host)(const TransportSettings& settings) = nullptr;
};

// For modules: the attach() every module uses.
inline void attach_module_log(const TransportHost& host) {
  log_sink().level.store(host.log_level, std::memory_order_relaxed);
  log_sink().write.store(host.write_log, std::memory_order_release);
}

// For transports: a T made from its settings and started (T::start()); null with `status` saying why.
template <typename T, typename Settings>
std::unique_ptr<Transport> make_started(const Settings& settings, Status& status) {
  auto t = std::make_unique<T>(settings);
  status = t->start();
  if (!status.ok()) return nullptr;
  return t;
}

// For modules: the TransportModule of a transport whose settings are TransportSettings::*Settings,
// made by Make(settings, status) and described by Describe(settings). A module's exported symbol
// returns it.
template <auto Settings, auto Make, auto Describe>
const TransportModule* transport_module(const char* name) {
  static const TransportModule module{
      kTransportAbiVersion, name, &attach_module_log,
      [](const TransportSettings& settings, Status& status) { return Make(settings.*Settings, status); },
      [](const TransportSettings& settings) { return Describe(settings.*Settings); }};
  return &module;
}

}  // namespace optireduce

extern "C" {
using optireduce_transport_module_fn = const optireduce::TransportModule* (*)();
}
