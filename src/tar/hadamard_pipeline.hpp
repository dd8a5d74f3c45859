// The randomized Hadamard transform of one bounded allreduce, shard by shard: the input is encoded
// into staging before it is sent, the all-gathered result is decoded from staging into the
// caller's buffer. With the worker (a free core per rank: decided once, at engine creation) the
// encodes run in the order the sends need them and each shard is decoded as soon as its data is
// final, while the calling thread keeps driving the network.
//
// 16-bit calls are transformed in float32 and travel in their own format (docs/design.md,
// "Hadamard for 16-bit calls"): a shard is widened, encoded and rounded into staging; the owner
// sums the rounded contributions as it sums any 16-bit ones (widened, rounded once); the gathered
// shard is widened, decoded and rounded into the output.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "optireduce/elements/format.hpp"
#include "optireduce/engine/aligned_allocator.hpp"
#include "optireduce/hadamard/hadamard.hpp"
#include "optireduce/hadamard/worker.hpp"
#include "optireduce/engine/tar/shard_layout.hpp"

namespace optireduce {

class HadamardPipeline {
 public:
  HadamardPipeline(unsigned block_log2, bool overlap);

  // A call of `layout` in the transformed domain: encodes `input` into `staging` shard by shard
  // (shard p under a seed every rank derives from the communicator, the call and p), then
  // decodes into `output`; all three hold `format`'s elements. `send_order`: the shards in the
  // order the sends need them.
  void begin(const ShardLayout& layout, std::uint64_t comm_id, std::uint64_t epoch, ElementFormat format, const void* input,
             void* staging, void* output, const std::vector<int>& send_order);
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
  // The float32 room 16-bit shards are transformed in (between calls: no job is running).
  std::size_t buffer_bytes() const { return caller_room_.bytes() + worker_room_.bytes(); }

 private:
  // Where a 16-bit shard is widened and transformed: one per thread that transforms (the calling
  // thread, the worker), since both decode at once in finish(). Grown to the largest shard.
  struct Room {
    std::vector<float, AlignedAllocator<float>> widened, transformed;
    std::size_t bytes() const { return (widened.capacity() + transformed.capacity()) * sizeof(float); }
  };
  enum class Direction { encode, decode };

  std::uint64_t seed(int p) const { return hadamard_seed(comm_id_, epoch_, static_cast<std::uint64_t>(p)); }
  // Encodes shard p from the input into staging, or decodes it from staging into the output.
  void transform(Direction direction, int p, Room& room) const;

  HadamardOptions options_;
  ShardLayout layout_;
  std::uint64_t comm_id_ = 0, epoch_ = 0;
  ElementFormat format_ = ElementFormat::float32;
  const std::byte* input_ = nullptr;
  std::byte* staging_ = nullptr;
  std::byte* output_ = nullptr;
  std::vector<std::uint8_t> decoded_;             // shards decoded or queued for it
  std::vector<HadamardWorker::Ticket> encoded_;   // per shard: its encode job (0: done)
  Room caller_room_, worker_room_;
  // Last, so it is joined before anything its jobs touch goes away.
  std::unique_ptr<HadamardWorker> worker_;
};

}  // namespace optireduce
