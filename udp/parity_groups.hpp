// Forward error correction on the udp transport's sends: each data datagram to a peer joins that
// peer's open parity group (datagram/fec.hpp); a full group, or one that has lingered open for
// kLinger (the tail of a burst: the engine queued nothing more to that peer for a while), is
// closed and its parity datagram goes out behind its members. Groups are closed by time, not when
// a peer's queue runs dry: the engine queues one chunk per peer per round, so a queue that just
// drained would give every datagram a parity of its own.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <vector>

#include "optireduce/datagram/fec.hpp"
#include "optireduce/transport.hpp"
#include "outgoing.hpp"

namespace optireduce::udp {

class ParityGroups {
 public:
  static constexpr auto kLinger = std::chrono::microseconds(500);

  ParityGroups() = default;
  ParityGroups(unsigned group, int ranks)
      : group_(group), encoders_(static_cast<std::size_t>(ranks), datagram::ParityEncoder(group)),
        opened_(static_cast<std::size_t>(ranks)) {}

  bool enabled() const { return group_ != 0; }
  // What a parity datagram adds to a member's size: its own header and member table.
  std::size_t parity_room() const;

  // `datagram` (sealed with `sequence`) joins its peer's group; true when the group is full.
  bool add(std::uint64_t sequence, const Outgoing& datagram, Clock::time_point now);
  // Closes `peer`'s group: its table and parity.
  void close(int peer, std::vector<std::byte>& table, std::vector<std::byte>& parity);
  // Peers whose group has been open for kLinger or longer.
  std::vector<int> lingering(Clock::time_point now) const;
  // When the next open group lingers long enough (time_point::max() when none is open).
  Clock::time_point next_close() const;
  // Drops every open group (its members will not all leave).
  void drop_open();

 private:
  unsigned group_ = 0;
  std::vector<datagram::ParityEncoder> encoders_;
  std::vector<Clock::time_point> opened_;
};

}  // namespace optireduce::udp
