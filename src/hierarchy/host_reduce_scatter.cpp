// A reduce-scatter in three stages (docs/design.md, "Reduce-scatters in three stages"):
// the host's reduce-scatter over its segment as for an allreduce; each slice's reduce-scatter
// among its holders, the holder on host h receiving the slice's piece of host h's part
// (hierarchy/scatter_map.hpp) where the slice lies in the host's result area; then each rank
// copies its own block out of the result area, once the host agreed the call (the all-gather's
// verdict: one outcome on every rank, as for an allreduce).
#include <algorithm>
#include <cstring>
#include <numeric>

#include "optireduce/engine/clock_us.hpp"
#include "optireduce/engine/engine/engine.hpp"
#include "optireduce/engine/hierarchy/host_sum.hpp"
#include "optireduce/engine/hierarchy/host_tiers.hpp"
#include "optireduce/engine/hierarchy/scatter_map.hpp"
#include "optireduce/engine/log.hpp"

namespace optireduce {

bool HostTiers::takes_reduce_scatter(std::span<const std::uint64_t> blocks) {
  std::string reason = scatter_flat_reason_;
  if (reason.empty()) reason = empty_part_reason(host_part_bounds(placement_, blocks));
  if (reason.empty()) return true;
  if (rank_ == 0 && std::find(scatter_reasons_logged_.begin(), scatter_reasons_logged_.end(), reason) == scatter_reasons_logged_.end()) {
    OR_LOG(info, "a reduce-scatter over %s stays flat: %s", placement_.counts_text().c_str(), reason.c_str());
    scatter_reasons_logged_.push_back(reason);
  }
  return false;
}

CallStats HostTiers::reduce_scatter(const void* input, void* output, std::span<const std::uint64_t> blocks, ElementFormat format,
                                    bool bounded, CallStats stats, Clock::time_point start) {
  const auto deadline = start + watchdog_;
  const std::size_t size = element_bytes(format);
  const auto elements = static_cast<std::size_t>(std::accumulate(blocks.begin(), blocks.end(), std::uint64_t{0}));
  const ElementRange mine = local_range(local_index_, local_ranks_, elements, host_granule(format));
  const std::vector<std::uint64_t> bounds = host_part_bounds(placement_, blocks);
  const int host = placement_.host_of_rank[static_cast<std::size_t>(rank_)];
  stats.stages.hierarchical = true;
  const std::uint64_t shm_before = shared_memory_bytes();
  // Stage 1: this rank's range summed over its host; a host of one rank exchanges a copy of its
  // input (its output holds its block alone).
  if (local_ranks_ == 1) reduced_.resize(std::max<std::size_t>(elements, 1) * size);
  const HostSums sums = reduce_in_host(input, reduced_.data(), elements, mine, format, deadline);
  const double reduced_at = us_since(start);
  stats.stages.host_reduce_us = reduced_at;
  // Stage 2: each slice's reduce-scatter among its holders, in place in the work area: the piece
  // this rank receives is written where it lies in the buffer (its own contribution read from
  // there first), the pieces it sends are read from theirs.
  Status failure = exchange_slices(sums, elements, format, stats, [&](Engine& engine, std::byte* at, ElementRange r, const Status& failed) {
    const std::vector<std::uint64_t> counts = slice_blocks(r, bounds);
    const std::uint64_t before = std::accumulate(counts.begin(), counts.begin() + host, std::uint64_t{0});
    return engine.reduce_scatter(at, at + before * size, counts, format, bounded, failed);
  });
  const double exchanged_at = us_since(start);
  stats.stages.exchange_us = exchanged_at - reduced_at;
  // Stage 3: this rank's block, from what its host's holders received.
  std::uint64_t begin = 0;
  for (int p = 0; p < rank_; ++p) begin += blocks[static_cast<std::size_t>(p)];
  const std::uint64_t own = blocks[static_cast<std::size_t>(rank_)];
  const ElementRange block{static_cast<std::size_t>(begin), static_cast<std::size_t>(begin + own)};
  if (local_ranks_ > 1 && stages_) {
    const Status gathered = stages_->all_gather_range(sums.work, mine, output, block, deadline, !failure.ok(),
                                                      &stats.dropped_entries, exchange_grace_, format);
    if (failure.ok()) failure = gathered;
  } else if (failure.ok() && block.size() != 0) {
    std::memcpy(output, sums.work + block.begin * size, block.size() * size);
  }
  // The entries the host's exchanges left out, every local rank's (they are not told apart by
  // block): at most this rank's block of them.
  stats.dropped_entries = std::min(stats.dropped_entries, own);
  finish_stats(stats, shm_before, exchanged_at, start, failure);
  return stats;
}

}  // namespace optireduce
