#include "tar_schedule.hpp"

namespace optireduce {

std::vector<ScheduledSend> scatter_schedule(const ShardLayout& layout, int rank, std::uint32_t last_slices) {
  std::vector<ScheduledSend> sends;
  const int n = layout.ranks();
  for (std::uint32_t c = 0; c < layout.max_chunks(); ++c) {
    for (int k = 1; k < n; ++k) {
      const int peer = rotation_peer(rank, n, k);
      const std::uint32_t chunks = layout.chunks_in_shard(peer);
      if (c < chunks) sends.push_back({peer, c, c + last_slices >= chunks});
    }
  }
  return sends;
}

}  // namespace optireduce
