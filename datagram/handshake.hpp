// The reachability probe of a datagram transport's connect(): hellos to every peer until both
// directions are known to work with each. A hello says what its sender knows of the receiver:
// whether it has heard the receiver, and whether it knows the receiver has heard it. A hello that
// does not say both is answered at once (also after connect, from poll()), so a peer that lost
// our hellos, or finished before us, still completes.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace optireduce::datagram {

class Handshake {
 public:
  // The bits of a hello's flags.
  enum Flag : std::uint8_t { kHeardYou = 1, kKnowYouHeardMe = 2 };

  Handshake() = default;
  Handshake(int self, int ranks);

  // A hello from `source` carrying `flags`; true when it should be answered.
  bool on_hello(int source, std::uint8_t flags);
  // What a hello to `peer` says now.
  std::uint8_t flags_for(int peer) const;
  // Peers still to greet: those with which a direction is not yet known to work.
  std::vector<int> pending() const;
  bool complete() const { return pending().empty(); }
  // Every rank but this one.
  std::vector<int> peers() const;
  // The pending peers as a list for a message: "2, 5".
  std::string pending_list() const;

 private:
  int self_ = -1;
  std::vector<std::uint8_t> heard_, heard_me_;
};

}  // namespace optireduce::datagram
