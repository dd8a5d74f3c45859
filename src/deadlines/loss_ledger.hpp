// What one call lost, counted once per chunk: a chunk can be short of contributions at its
// owner, missing at a receiver, and closed again by the fill agreement; it counts as dropped once.
#pragma once

#include <cstdint>
#include <vector>

#include "optireduce/engine/tar/shard_layout.hpp"

namespace optireduce {

class LossLedger {
 public:
  void begin(const ShardLayout& layout) {
    chunk_base_.assign(static_cast<std::size_t>(layout.ranks()), 0);
    for (int p = 1; p < layout.ranks(); ++p) chunk_base_[p] = chunk_base_[p - 1] + layout.chunks_in_shard(p - 1);
    total_chunks_ = chunk_base_.back() + layout.chunks_in_shard(layout.ranks() - 1);
    counted_.assign(static_cast<std::size_t>(total_chunks_), 0);
    filled_mark_.assign(static_cast<std::size_t>(total_chunks_), 0);
    dropped_ = filled_ = 0;
    fill_hash_ = 0;
  }
  // Chunks are numbered over the whole buffer, shard by shard.
  std::uint64_t global_chunk(int owner, std::uint32_t chunk) const { return chunk_base_[owner] + chunk; }
  std::uint64_t total_chunks() const { return total_chunks_; }

  // `entries` of chunk g lacked data; counted unless they were already.
  void drop(std::uint64_t g, std::uint64_t entries) {
    if (counted_[g]) return;
    counted_[g] = 1;
    dropped_ += entries;
  }
  // This rank wrote a fill into those entries (they are dropped too).
  void fill(std::uint64_t g, std::uint64_t entries) {
    filled_ += entries;
    drop(g, entries);
    if (!filled_mark_[g]) {
      filled_mark_[g] = 1;
      fill_hash_ ^= mix(g + 1);
    }
  }
  // Which chunks this rank filled, as a hash independent of the order they were filled in: two
  // ranks' results of a call are identical exactly when their hashes are (every chunk not
  // filled holds its owner's data).
  std::uint64_t fill_hash() const { return fill_hash_; }
  std::uint64_t dropped() const { return dropped_; }
  std::uint64_t filled() const { return filled_; }

 private:
  std::vector<std::uint64_t> chunk_base_;  // per owner: global index of its first chunk
  std::uint64_t total_chunks_ = 0;
  std::vector<std::uint8_t> counted_;
  std::uint64_t dropped_ = 0, filled_ = 0;
  std::vector<std::uint8_t> filled_mark_;
  std::uint64_t fill_hash_ = 0;

  static std::uint64_t mix(std::uint64_t x) {
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
  }
};

}  // namespace optireduce
