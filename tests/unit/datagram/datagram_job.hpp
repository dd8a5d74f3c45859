// A job of a few ranks for the datagram units: one secret, each rank's authenticator and sealer,
// datagrams built as a transport builds them, and a sink that records what the dispatch hands on.
#pragma once

#include <memory>
#include <vector>

#include "optireduce/datagram/authenticator.hpp"
#include "optireduce/datagram/dispatch.hpp"
#include "optireduce/datagram/sealer.hpp"

namespace optireduce::testing {

inline std::vector<std::byte> pattern(std::size_t n, unsigned first = 0) {
  std::vector<std::byte> v(n);
  for (std::size_t i = 0; i < n; ++i) v[i] = std::byte(static_cast<unsigned char>(first + 7 * i));
  return v;
}

class DatagramJob {
 public:
  explicit DatagramJob(int ranks, datagram::Secret secret = {std::byte{1}, std::byte{2}, std::byte{3}}) : ranks_(ranks) {
    for (int r = 0; r < ranks; ++r) {
      Status s;
      auth_.push_back(datagram::Authenticator::create(secret, r, ranks, s));
      sealers_.emplace_back(auth_.back().get(), r, ranks);
    }
  }
  int ranks() const { return ranks_; }
  datagram::Authenticator* auth(int rank) { return auth_[static_cast<std::size_t>(rank)].get(); }
  datagram::Sealer& sealer(int rank) { return sealers_[static_cast<std::size_t>(rank)]; }

  // One datagram from `from` to `to` as it goes on the wire.
  std::vector<std::byte> datagram(int from, int to, datagram::Kind kind, std::span<const std::byte> header,
                                  std::span<const std::byte> payload) {
    const auto head = sealer(from).seal(to, kind, header, payload);
    std::vector<std::byte> wire(head.begin(), head.end());
    wire.insert(wire.end(), header.begin(), header.end());
    wire.insert(wire.end(), payload.begin(), payload.end());
    return wire;
  }

 private:
  int ranks_;
  std::vector<std::unique_ptr<datagram::Authenticator>> auth_;
  std::vector<datagram::Sealer> sealers_;
};

struct RecordingSink final : datagram::DatagramSink {
  struct Data {
    int source;
    std::vector<std::byte> header, payload;
  };
  std::vector<Data> data;
  std::vector<std::pair<int, std::uint8_t>> hellos;
  std::vector<std::pair<int, std::uint64_t>> pings, pongs;

  std::size_t calls() const { return data.size() + hellos.size() + pings.size() + pongs.size(); }
  void on_hello(int source, std::uint8_t flags) override { hellos.emplace_back(source, flags); }
  void on_ping(int source, std::uint64_t value) override { pings.emplace_back(source, value); }
  void on_pong(int source, std::uint64_t value) override { pongs.emplace_back(source, value); }
  void on_data(int source, std::span<const std::byte> header, std::span<const std::byte> payload, Clock::time_point) override {
    data.push_back({source, {header.begin(), header.end()}, {payload.begin(), payload.end()}});
  }
};

}  // namespace optireduce::testing
