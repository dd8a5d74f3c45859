// Two UCX transports in one process (each its own worker on the shared context), connected over
// the host's transports: what the UCX transport's tests start from.
#pragma once

#include <gtest/gtest.h>

#include <cstdlib>
#include <memory>
#include <thread>
#include <vector>

#include "optireduce/ucx/ucx_transport.hpp"

namespace optireduce {

struct Pair {
  std::vector<std::unique_ptr<Transport>> t;
};

inline Pair connected_pair() {
  Pair p;
  for (int r = 0; r < 2; ++r) {
    Status status;
    p.t.push_back(ucx::make_transport({256u << 10}, status));
    EXPECT_TRUE(status.ok()) << status.text();
  }
  const std::vector<std::vector<std::byte>> addresses{p.t[0]->local_address(), p.t[1]->local_address()};
  Status connected[2];
  // Both sides connect at once, each driving its own worker.
  std::thread other([&] { connected[1] = p.t[1]->connect(1, addresses, Clock::now() + std::chrono::seconds(30)); });
  connected[0] = p.t[0]->connect(0, addresses, Clock::now() + std::chrono::seconds(30));
  other.join();
  EXPECT_TRUE(connected[0].ok()) << connected[0].text();
  EXPECT_TRUE(connected[1].ok()) << connected[1].text();
  return p;
}

// The same, with the engine's UCX held to these transports ("" leaves UCX's choice).
inline Pair connected_pair_over(const char* tls) {
  if (*tls) {
    EXPECT_EQ(setenv("OPTIREDUCE_UCX_TLS", tls, 1), 0);
  }
  Pair p = connected_pair();
  unsetenv("OPTIREDUCE_UCX_TLS");
  return p;
}

}  // namespace optireduce
