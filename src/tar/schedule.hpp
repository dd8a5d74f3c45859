// The Transpose AllReduce send order. Scatter-reduce interleaves destinations slice by slice in
// peer order r+1, r+2, ... so no receiver gets everybody's data at once; all-gather sends each
// reduced chunk of the own shard to the peers in the same rotation.
#pragma once

#include <cstdint>
#include <vector>

#include "optireduce/engine/tar/shard_layout.hpp"

namespace optireduce {

struct ScheduledSend {
  int peer;
  std::uint32_t chunk;  // chunk of the destination's shard
  bool last_slice;      // one of the last `last_slices` messages of this phase to this peer
  std::uint32_t follow; // on a last slice: how many of them come after it
};

// How many of the final messages of a phase carry the "last slice" flag: a receiver starts its
// short closing grace once it has one of them from every sender. Over a transport that delivers
// in order, the last one (then everything before it is in); over datagrams, the last three, so a
// single lost datagram does not hide the end of a phase and hold the receiver to its deadline.
constexpr std::uint32_t kLastSlicesInOrder = 1;
constexpr std::uint32_t kLastSlicesDatagrams = 3;

// Peers in the rotation r+1, r+2, ..., r-1.
inline int rotation_peer(int rank, int ranks, int k) { return (rank + k) % ranks; }

// Calls visit(send) for every scatter-reduce send of `rank`, in order; stops when it returns false.
template <typename Visit>
void for_each_scatter_send(const ShardLayout& layout, int rank, std::uint32_t last_slices, Visit&& visit) {
  const int n = layout.ranks();
  for (std::uint32_t c = 0; c < layout.max_chunks(); ++c)
    for (int k = 1; k < n; ++k) {
      const int peer = rotation_peer(rank, n, k);
      const std::uint32_t chunks = layout.chunks_in_shard(peer);
      if (c < chunks && !visit(ScheduledSend{peer, c, c + last_slices >= chunks, chunks - 1 - c})) return;
    }
}

// The shards in the order a rank's sends first need them: the peers in rotation, the own last.
std::vector<int> shard_send_order(int rank, int ranks);

}  // namespace optireduce
