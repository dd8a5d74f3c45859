// The reachability probe: ranks exchanging hellos complete once both directions are known to
// work with every peer, whatever is lost, and a rank that finished still answers a peer that
// did not.
#include <gtest/gtest.h>

#include <deque>
#include <random>

#include "optireduce/datagram/handshake.hpp"

namespace optireduce::datagram {
namespace {

struct Hello {
  int from, to;
  std::uint8_t flags;
};

// `ranks` handshakes over a channel that loses each hello with probability `loss`; every round,
// each rank greets its pending peers, then every hello in flight is delivered (and answered).
int rounds_to_complete(int ranks, double loss, unsigned seed) {
  std::vector<Handshake> h;
  for (int r = 0; r < ranks; ++r) h.emplace_back(r, ranks);
  std::mt19937 rng(seed);
  std::bernoulli_distribution lost(loss);
  std::deque<Hello> wire;
  for (int round = 1; round <= 1000; ++round) {
    for (int r = 0; r < ranks; ++r)
      for (int p : h[static_cast<std::size_t>(r)].pending()) wire.push_back({r, p, h[static_cast<std::size_t>(r)].flags_for(p)});
    while (!wire.empty()) {
      const Hello m = wire.front();
      wire.pop_front();
      if (lost(rng)) continue;
      Handshake& to = h[static_cast<std::size_t>(m.to)];
      if (to.on_hello(m.from, m.flags)) wire.push_back({m.to, m.from, to.flags_for(m.from)});
    }
    bool all = true;
    for (const auto& x : h) all = all && x.complete();
    if (all) return round;
  }
  return -1;
}

TEST(Handshake, CompletesOnACleanNetworkInOneRound) { EXPECT_EQ(rounds_to_complete(4, 0.0, 1), 1); }

TEST(Handshake, CompletesWhateverIsLost) {
  for (unsigned seed = 0; seed < 20; ++seed) EXPECT_GT(rounds_to_complete(5, 0.5, seed), 0) << seed;
}

TEST(Handshake, AnswersUntilThePeerSaysItKnowsBothDirections) {
  Handshake a(0, 2), b(1, 2);
  EXPECT_EQ(a.flags_for(1), 0);
  EXPECT_TRUE(b.on_hello(0, a.flags_for(1)));  // b heard a: tell a
  EXPECT_EQ(b.flags_for(0), Handshake::kHeardYou);
  EXPECT_TRUE(a.on_hello(1, b.flags_for(0)));  // a knows both ways now, b does not yet
  EXPECT_TRUE(a.complete());
  EXPECT_FALSE(b.complete());
  EXPECT_EQ(a.flags_for(1), Handshake::kHeardYou | Handshake::kKnowYouHeardMe);
  EXPECT_FALSE(b.on_hello(0, a.flags_for(1)));  // nothing more to say
  EXPECT_TRUE(b.complete());
  EXPECT_EQ(b.pending_list(), "");
}

TEST(Handshake, NamesThePendingPeersAndIgnoresStrangers) {
  Handshake h(1, 4);
  EXPECT_EQ(h.pending_list(), "0, 2, 3");
  EXPECT_FALSE(h.on_hello(7, 3));
  EXPECT_FALSE(h.on_hello(1, 3));  // itself
  h.on_hello(2, Handshake::kHeardYou);
  EXPECT_EQ(h.pending_list(), "0, 3");
}

}  // namespace
}  // namespace optireduce::datagram
