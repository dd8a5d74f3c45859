// The exact result as the engine computes it, for the tests that compare bitwise: each shard's
// float sum in its owner's summation order (tar/scatter_reduce.hpp).
#pragma once

#include <cstdint>
#include <vector>

#include "optireduce/engine/tar/scatter_reduce.hpp"
#include "optireduce/engine/tar/shard_layout.hpp"

namespace optireduce {

// value(rank, i): entry i of rank `rank`'s input.
template <typename Value>
std::vector<float> sum_in_owners_order(int ranks, std::uint64_t count, Value&& value) {
  const ShardLayout layout(count, ranks, 1);  // shard bounds do not depend on the chunk size
  std::vector<float> sum(count);
  for (int owner = 0; owner < ranks; ++owner)
    for (std::uint64_t i = layout.shard_begin(owner); i < layout.shard_begin(owner + 1); ++i) {
      float s = value(owner, i);
      for (int place = 1; place < ranks; ++place) s += value(summation_source(owner, ranks, place), i);
      sum[i] = s;
    }
  return sum;
}

}  // namespace optireduce
