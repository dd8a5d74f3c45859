// The Transpose AllReduce send order. Scatter-reduce interleaves destinations slice by slice in
// peer order r+1, r+2, ... so no receiver gets everybody's data at once; all-gather sends each
// reduced chunk of the own shard to the peers in the same rotation.
#pragma once

#include <cstdint>
#include <vector>

#include "shard_layout.hpp"

namespace optireduce {

struct ScheduledSend {
  int peer;
  std::uint32_t chunk;  // chunk of the destination's shard (scatter) or of the own shard (gather)
  bool last_slice;      // one of the last `last_slices` messages of this phase from this rank to this peer
};

// How many of the final messages of a phase carry the "last slice" flag: a receiver starts its
// short closing grace once it has one of them from every sender. Over a transport that delivers
// in order, the last one (then everything before it is in); over datagrams, the last three, so a
// single lost datagram does not hide the end of a phase and hold the receiver to its deadline.
constexpr std::uint32_t kLastSlicesInOrder = 1;
constexpr std::uint32_t kLastSlicesDatagrams = 3;

// Every scatter-reduce send of `rank`, in order.
std::vector<ScheduledSend> scatter_schedule(const ShardLayout& layout, int rank,
                                            std::uint32_t last_slices = kLastSlicesInOrder);

// Peers in the rotation r+1, r+2, ..., r-1.
inline int rotation_peer(int rank, int ranks, int k) { return (rank + k) % ranks; }

}  // namespace optireduce
