// Two udp transports of one process, connected to each other over loopback or a named interface,
// and helpers to move messages between them. Both sides progress only inside poll(), so the
// exchanges run the sender in a thread of its own.
#pragma once

#include <atomic>
#include <memory>
#include <string>
#include <vector>

#include "optireduce/transport.hpp"
#include "optireduce/transport_module.hpp"

namespace optireduce::testing {

struct UdpPair {
  std::unique_ptr<Transport> rank[2];
  Status connected[2];
};

// Both created and connected (in two threads); the statuses say how it went.
UdpPair connect_udp_pair(const UdpSettings& settings);

// `ranks` transports created and connected, one thread each; empty when one failed.
std::vector<std::unique_ptr<Transport>> connect_udp_job(int ranks, const UdpSettings& settings);

// A message as the tests send it: an 8-byte header (id, length) and a payload whose bytes follow
// from the id.
std::vector<std::byte> test_header(std::uint32_t id, std::uint32_t payload_bytes);
std::vector<std::byte> test_payload(std::uint32_t id, std::size_t bytes);

// Polls `t` until `stop` is set or the deadline passes, keeping its sends moving.
void keep_polling(Transport& t, const std::atomic<bool>& stop, Clock::time_point deadline);

// The first non-loopback interface with an IPv4 address, "" when there is none.
std::string outward_interface();

}  // namespace optireduce::testing
