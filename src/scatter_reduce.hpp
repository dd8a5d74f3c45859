// The scatter-reduce phase of one call, at the owner of a shard: which contributions came for
// which chunk of the own shard, where they wait, and the reduction of a chunk once its
// contributions are in (or its deadline passed).
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "optireduce/engine/shard_layout.hpp"
#include "optireduce/transport.hpp"

namespace optireduce {

enum class Accepted { taken, duplicate, closed, unreadable };

struct ReducedChunk {
  Extent extent;
  bool partial = false;   // reduced without every contribution
  bool last = false;      // among the last `last_slices` reduced: flagged so receivers can close early
  std::uint32_t follow = 0;  // when last: how many chunks are still to be reduced after it
};

class ScatterReduce {
 public:
  void begin(const ShardLayout& layout, int rank, std::uint32_t last_slices);

  // A contribution of `source` to own chunk `chunk` (validated by the caller).
  Accepted accept(int source, std::uint32_t chunk, const InboundMessage& message);
  // The contribution of `source` to `chunk` where the transport holds `message` in memory and it
  // is the last one the chunk lacks: taken without a copy (counted as accept() counts it), the
  // floats to hand to reduce() at once, during the callback. Null where that does not hold.
  const float* take_last_in_place(int source, std::uint32_t chunk, const InboundMessage& message);
  // A chunk whose contributions are all in, if any.
  std::optional<std::uint32_t> next_ready();
  // Sums chunk `chunk` by source rank (never arrival order, so results do not change from run
  // to run), over the contributions it has, reading this rank's own contribution from `own`;
  // writes the sum to `result` (what the all-gather sends read) and, unless null, to `output`
  // too while it is hot; closes the chunk. `own` may be `result` or `output`: each block is read
  // before it is written.
  // `lent`, unless null, is where `lent_source`'s contribution is (take_last_in_place).
  ReducedChunk reduce(std::uint32_t chunk, const float* own, float* result, float* output, int lent_source = -1,
                      const float* lent = nullptr);
  // The chunks still open (the deadline closes them with what they have).
  std::vector<std::uint32_t> open_chunks() const;
  // Entries of the own shard still lacking a contribution (they are dropped if closed now).
  std::uint64_t open_entries() const;
  // Whether `source` still owes a contribution to an open chunk.
  bool waiting_for(int source) const;
  // The open chunks `source` still owes a contribution to (what a resend request names).
  void missing_from(int source, std::vector<std::uint32_t>& out) const;
  // Whether chunk `chunk` is reduced, and if so whether without every contribution.
  bool reduced(std::uint32_t chunk) const { return chunk < chunks_ && closed_[chunk] != 0; }
  bool reduced_partial(std::uint32_t chunk) const { return closed_[chunk] == kClosedPartial; }

  bool complete() const { return reduced_ == chunks_; }
  bool expects_data() const { return chunks_ > 0; }
  double received_fraction() const { return expected_ ? double(received_) / double(expected_) : 1.0; }
  Clock::time_point last_arrival() const { return last_arrival_; }
  std::size_t buffer_bytes() const { return slots_.capacity() * sizeof(float); }

 private:
  // Counts a contribution in; true when it completes its chunk.
  bool count_in(std::uint8_t& seen, std::uint32_t chunk);

  ShardLayout layout_;
  int rank_ = 0, ranks_ = 1;
  std::uint32_t chunks_ = 0, reduced_ = 0, last_slices_ = 1;
  std::uint64_t stride_ = 0;                 // floats per source in slots_
  std::vector<float> slots_;                 // other ranks' contributions, one stride each
  std::vector<const float*> sources_;        // the contributions a reduce sums, in rank order
  std::vector<std::uint32_t> contributors_;  // per own chunk: contributions in
  static constexpr std::uint8_t kClosedExact = 1, kClosedPartial = 2;
  std::vector<std::uint8_t> closed_;         // per own chunk: 0 open, else reduced (later contributions are stale)
  std::vector<std::uint8_t> seen_;           // [source][chunk]
  std::vector<std::uint32_t> ready_;
  std::uint64_t received_ = 0, expected_ = 0;
  Clock::time_point last_arrival_{};
};

}  // namespace optireduce
