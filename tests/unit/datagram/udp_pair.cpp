#include "udp_pair.hpp"

#include <thread>

#include "optireduce/byte_order.hpp"
#include "optireduce/udp/local_interfaces.hpp"
#include "optireduce/udp/udp_transport.hpp"

namespace optireduce::testing {

UdpPair connect_udp_pair(const UdpSettings& settings) {
  UdpPair pair;
  for (int r = 0; r < 2; ++r) {
    pair.rank[r] = make_started<udp::UdpTransport>(settings, pair.connected[r]);
    if (!pair.rank[r]) return pair;
  }
  const std::vector<std::vector<std::byte>> addresses = {pair.rank[0]->local_address(), pair.rank[1]->local_address()};
  const auto deadline = Clock::now() + std::chrono::seconds(10);
  std::thread other([&] { pair.connected[1] = pair.rank[1]->connect(1, addresses, deadline); });
  pair.connected[0] = pair.rank[0]->connect(0, addresses, deadline);
  other.join();
  return pair;
}

std::vector<std::unique_ptr<Transport>> connect_udp_job(int ranks, const UdpSettings& settings) {
  std::vector<std::unique_ptr<Transport>> job(static_cast<std::size_t>(ranks));
  std::vector<std::vector<std::byte>> addresses;
  Status s;
  for (auto& t : job) {
    if (!(t = make_started<udp::UdpTransport>(settings, s))) return {};
    addresses.push_back(t->local_address());
  }
  const auto deadline = Clock::now() + std::chrono::seconds(10);
  std::vector<Status> connected(job.size());
  std::vector<std::thread> threads;
  for (int r = 0; r < ranks; ++r)
    threads.emplace_back([&, r] { connected[static_cast<std::size_t>(r)] = job[static_cast<std::size_t>(r)]->connect(r, addresses, deadline); });
  for (auto& t : threads) t.join();
  for (const Status& c : connected)
    if (!c.ok()) return {};
  return job;
}

std::vector<std::byte> test_header(std::uint32_t id, std::uint32_t payload_bytes) {
  std::vector<std::byte> h(8);
  put_le<std::uint32_t>(h.data(), id);
  put_le<std::uint32_t>(h.data() + 4, payload_bytes);
  return h;
}

std::vector<std::byte> test_payload(std::uint32_t id, std::size_t bytes) {
  std::vector<std::byte> p(bytes);
  for (std::size_t i = 0; i < bytes; ++i) p[i] = std::byte(static_cast<unsigned char>(id * 31 + i * 7));
  return p;
}

void keep_polling(Transport& t, const std::atomic<bool>& stop, Clock::time_point deadline) {
  while (!stop.load() && Clock::now() < deadline)
    (void)t.poll(std::min(deadline, Clock::now() + std::chrono::milliseconds(5)), [](const InboundMessage&) {});
}

std::string outward_interface() {
  std::vector<udp::LocalInterface> interfaces;
  if (!udp::ipv4_interfaces(interfaces).ok()) return "";
  for (const auto& li : interfaces)
    if (!li.loopback) return li.name;
  return "";
}

}  // namespace optireduce::testing
