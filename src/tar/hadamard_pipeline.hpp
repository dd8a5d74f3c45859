// The randomized Hadamard transform of one bounded call, shard by shard: the input is encoded
// into staging before it is sent, the all-gathered result is decoded from staging into the
// caller's buffer. With the worker (a free core per rank: decided once, at engine creation) the
// encodes run in the order the sends need them and each shard is decoded as soon as its data is
// final, while the calling thread keeps driving the network.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "optireduce/hadamard/hadamard.hpp"
#include "optireduce/hadamard/worker.hpp"
#include "optireduce/engine/tar/shard_layout.hpp"

namespace optireduce {

class HadamardPipeline {
 public:
  HadamardPipeline(unsigned block_log2, bool overlap);

  // A call of `layout` in the transformed domain: encodes `input` into `staging` shard by shard
  // (shard p under a seed every rank derives from the communicator, the call and p), then
  // decodes into `output`. `send_order`: the shards in the order the sends need them.
  void begin(const ShardLayout& layout, std::uint64_t comm_id, std::uint64_t epoch, const float* input,
             float* staging, float* output, const std::vector<int>& send_order);
  // Shard p's encoded data may be read or overwritten (sends, reduction, gathered chunks).
  void await_encoded(int p);
  // Shard p's data is final (all its chunks are in): decode it now if the worker is there.
  void shard_final(int p);
  // Shard p changed after it was final (the fill agreement zeroed a chunk): decode it again.
  void changed(int p) { decoded_[p] = 0; }
  // Before anything else changes shards: every queued job is done.
  void quiesce() {
    if (worker_) worker_->wait_all();
  }
  // Decodes every shard not decoded yet (split between the worker and this thread) and waits.
  void finish();

 private:
  std::uint64_t seed(int p) const { return hadamard_seed(comm_id_, epoch_, static_cast<std::uint64_t>(p)); }
  void encode(int p);
  void decode(int p) const;

  HadamardOptions options_;
  ShardLayout layout_;
  std::uint64_t comm_id_ = 0, epoch_ = 0;
  const float* input_ = nullptr;
  float* staging_ = nullptr;
  float* output_ = nullptr;
  std::vector<std::uint8_t> decoded_;             // shards decoded or queued for it
  std::vector<HadamardWorker::Ticket> encoded_;   // per shard: its encode job (0: done)
  // Last, so it is joined before anything its jobs touch goes away.
  std::unique_ptr<HadamardWorker> worker_;
};

}  // namespace optireduce
