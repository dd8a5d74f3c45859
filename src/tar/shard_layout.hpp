// How one call's buffer is cut: N contiguous shards (rank p owns shard p), balanced or of the sizes
// a reduce-scatter's counts give, each cut into chunks of at most `chunk_elems` elements, the
// unit of pipelining and of loss.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <vector>

namespace optireduce {

struct Extent {
  std::uint64_t offset = 0;  // elements from the start of the whole buffer
  std::uint32_t length = 0;  // elements
};

class ShardLayout {
 public:
  ShardLayout() = default;
  ShardLayout(std::uint64_t total, int ranks, std::uint32_t chunk_elems)
      : total_(total), ranks_(ranks), chunk_elems_(std::max<std::uint32_t>(chunk_elems, 1)) {}
  // Shard p holds shard_sizes[p] elements (a reduce-scatter's counts; zeros allowed).
  ShardLayout(std::span<const std::uint64_t> shard_sizes, std::uint32_t chunk_elems)
      : ranks_(static_cast<int>(shard_sizes.size())), chunk_elems_(std::max<std::uint32_t>(chunk_elems, 1)) {
    auto begins = std::make_shared<std::vector<std::uint64_t>>(shard_sizes.size() + 1, 0);
    for (std::size_t p = 0; p < shard_sizes.size(); ++p) {
      (*begins)[p + 1] = (*begins)[p] + shard_sizes[p];
      max_chunks_ = std::max(max_chunks_, static_cast<std::uint32_t>((shard_sizes[p] + chunk_elems_ - 1) / chunk_elems_));
    }
    total_ = begins->back();
    begins_ = std::move(begins);
  }

  std::uint64_t total() const { return total_; }
  int ranks() const { return ranks_; }
  std::uint32_t chunk_elems() const { return chunk_elems_; }

  std::uint64_t shard_begin(int p) const {
    if (begins_) return (*begins_)[static_cast<std::size_t>(p)];
    const std::uint64_t base = total_ / ranks_, extra = total_ % ranks_;
    return static_cast<std::uint64_t>(p) * base + std::min<std::uint64_t>(p, extra);
  }
  std::uint64_t shard_size(int p) const { return shard_begin(p + 1) - shard_begin(p); }
  std::uint32_t chunks_in_shard(int p) const {
    return static_cast<std::uint32_t>((shard_size(p) + chunk_elems_ - 1) / chunk_elems_);
  }
  // Balanced, shard 0 is never smaller.
  std::uint32_t max_chunks() const { return begins_ ? max_chunks_ : chunks_in_shard(0); }

  Extent chunk(int p, std::uint32_t c) const {
    const std::uint64_t start = static_cast<std::uint64_t>(c) * chunk_elems_;
    return {shard_begin(p) + start, static_cast<std::uint32_t>(std::min<std::uint64_t>(chunk_elems_, shard_size(p) - start))};
  }

  // The chunk index of shard p that is exactly [offset, offset + length), if there is one.
  std::optional<std::uint32_t> chunk_index(int p, std::uint64_t offset, std::uint32_t length) const {
    const std::uint64_t begin = shard_begin(p), size = shard_size(p);
    if (offset < begin || offset - begin >= size) return std::nullopt;
    const std::uint64_t rel = offset - begin;
    if (rel % chunk_elems_ != 0) return std::nullopt;
    const auto c = static_cast<std::uint32_t>(rel / chunk_elems_);
    if (chunk(p, c).length != length) return std::nullopt;
    return c;
  }

 private:
  std::uint64_t total_ = 0;
  int ranks_ = 1;
  std::uint32_t chunk_elems_ = 1;
  // Shards of given sizes: where each begins, and the end (shared: a layout is copied per call).
  std::shared_ptr<const std::vector<std::uint64_t>> begins_;
  std::uint32_t max_chunks_ = 0;
};

}  // namespace optireduce
