// The scatter-reduce phase of one call, at the owner of a shard: which contributions came for
// which chunk of the own shard, where they wait, and the reduction of a chunk once its
// contributions are in (or its deadline passed).
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "optireduce/elements/format.hpp"
#include "optireduce/engine/tar/shard_layout.hpp"
#include "optireduce/transport.hpp"

namespace optireduce {

enum class Accepted { taken, duplicate, closed, unreadable };

struct ReducedChunk {
  Extent extent;
  bool partial = false;   // reduced without every contribution
  bool last = false;      // among the last `last_slices` reduced: flagged so receivers can close early
  std::uint32_t follow = 0;  // when last: how many chunks are still to be reduced after it
};

// The rank whose contribution is at place `place` (0 ..< ranks) of shard `owner`'s summation order:
// the owner itself, then the peers in the order their chunks reach it (tar_schedule's rotation
// has rank r send to r+1 first, then r+2, ...): owner-1, owner-2, ...
inline int summation_source(int owner, int ranks, int place) { return (owner - place % ranks + ranks) % ranks; }

// The owner sums each chunk in one fixed order: its own contribution, then its peers in the order
// they send to it (rank-1, rank-2, ..., as tar_schedule's rotation has them), so every run and
// every rank get the same bits whatever the arrival order. A contribution that arrives when every
// one before it in that order is in is added at once, from where the transport holds it, into the
// chunk's running sum; one that arrives ahead of its turn waits in a slot. 16-bit contributions
// are widened: their running sum is float32 (kept here), rounded once when the chunk's last
// contribution is in (elements/convert.hpp).
class ScatterReduce {
 public:
  void begin(const ShardLayout& layout, int rank, std::uint32_t last_slices, ElementFormat format = ElementFormat::float32);
  // Where this call's sums go, for the whole call: `own` is this rank's contribution (the input's
  // own shard; may be `result` or `output`), `result` where the final sums are written (and a
  // float32 call's running ones: what the all-gather sends read), `output`, unless null, a second
  // copy of each final sum. `result` and `output` hold the whole buffer from element `origin` on
  // (a reduce-scatter's block: its shard's begin). `add_on_arrival` off keeps every contribution
  // in a slot until the reduce (where `own` is not readable before it: the Hadamard domain's
  // encoding worker writes it meanwhile).
  void bind(const void* own, void* result, void* output, bool add_on_arrival, std::uint64_t origin = 0);

  // A contribution of `source` to own chunk `chunk` (validated by the caller), during the
  // transport's callback.
  Accepted accept(int source, std::uint32_t chunk, const InboundMessage& message);
  // A chunk whose contributions are all in, if any.
  std::optional<std::uint32_t> next_ready();
  // Completes chunk `chunk` over the contributions it has (a missing one counts as zero) and
  // closes it: the final sum is in `result` and `output` afterwards.
  ReducedChunk reduce(std::uint32_t chunk);
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
  std::size_t buffer_bytes() const { return slots_.capacity() + running_.capacity() * sizeof(float); }
  // Contributions added where the transport held them, and those that waited in a slot.
  std::uint64_t added_on_arrival() const { return added_on_arrival_; }
  std::uint64_t waited_in_slot() const { return waited_in_slot_; }

 private:
  // Counts a contribution in; true when it completes its chunk.
  bool count_in(std::uint8_t& seen, std::uint32_t chunk);
  // Whether `source`'s contribution to `chunk` came (counted in by count_in).
  std::uint8_t& seen_at(int source, std::uint32_t chunk) { return seen_[static_cast<std::size_t>(source) * chunks_ + chunk]; }
  std::uint8_t seen_at(int source, std::uint32_t chunk) const { return seen_[static_cast<std::size_t>(source) * chunks_ + chunk]; }
  std::byte* slot(int source, std::uint64_t rel) {
    return slots_.data() + ((source < rank_ ? source : source - 1) * stride_ + rel) * element_bytes_;
  }
  // The peer at place `k` (1 ..< ranks) of the summation order, and a peer's place in it.
  int peer_at(int k) const { return summation_source(rank_, ranks_, k); }
  int place_of(int source) const { return (rank_ - source + ranks_) % ranks_; }
  // Adds to chunk `chunk`'s running sum `arrived` (the contribution of the next peer in order,
  // unless null) and then every contribution waiting in a slot whose turn has come; with
  // `to_the_end`, every contribution still in (the chunk is being closed).
  void add_in_order(std::uint32_t chunk, const Extent& e, const void* arrived, bool to_the_end);
  // One pass over sources_ (in order) into chunk `e`'s sum; `first` when nothing of it is summed
  // yet, `final` when the pass completes it.
  void sum_pass(const Extent& e, bool first, bool final);

  ShardLayout layout_;
  int rank_ = 0, ranks_ = 1;
  std::uint32_t chunks_ = 0, reduced_ = 0, last_slices_ = 1;
  ElementFormat format_ = ElementFormat::float32;
  std::size_t element_bytes_ = 4;
  std::uint64_t stride_ = 0;                 // elements per source in slots_
  std::vector<std::byte> slots_;             // contributions that came ahead of their turn, one stride per peer
  std::vector<float> running_;               // 16-bit calls: the own shard's running sums
  std::vector<const void*> sources_;         // what one pass of the sum adds, in order
  std::vector<std::uint32_t> contributors_;  // per own chunk: contributions in
  std::vector<std::uint32_t> added_;         // per own chunk: places of the order in its running sum (0: none yet)
  static constexpr std::uint8_t kClosedExact = 1, kClosedPartial = 2;
  std::vector<std::uint8_t> closed_;         // per own chunk: 0 open, else reduced (later contributions are stale)
  std::vector<std::uint8_t> seen_;           // [source][chunk]
  std::vector<std::uint32_t> ready_;
  const std::byte* own_ = nullptr;
  std::byte* result_ = nullptr;
  std::byte* output_ = nullptr;
  std::uint64_t origin_ = 0;
  bool add_on_arrival_ = false;
  std::uint64_t received_ = 0, expected_ = 0;
  std::uint64_t added_on_arrival_ = 0, waited_in_slot_ = 0;
  Clock::time_point last_arrival_{};
};

}  // namespace optireduce
