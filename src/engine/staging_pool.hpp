// Memory that sends read after a call may have returned. A bounded call can end with sends
// still in flight (a TCP retransmission stalls one peer's queue; UCX cannot cancel an active
// message), so what they read must not be the caller's buffer: it is staged here. Exact calls
// too end with their last sends (the "done" messages) possibly still queued. A call takes any
// buffer whose sends have all completed, adding one (up to kMaxBuffers) rather than waiting for
// a stalled peer.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "optireduce/engine/aligned_allocator.hpp"
#include "optireduce/engine/tar/wire_header.hpp"
#include "optireduce/transport.hpp"

namespace optireduce {

struct StagingBuffer {
  std::vector<float, AlignedAllocator<float>> data;  // the staged input, then the reduced shard
  std::vector<std::array<std::byte, WireHeader::kEncodedSize>> headers;  // one per send of the call
  std::size_t headers_used = 0;
  std::vector<std::uint64_t> posted_until;  // per peer: the send count once its call posted
  std::vector<std::byte> missing;           // bitmap of the all-gather chunks this rank lacked

  // A header slot for the next send; the storage does not move while the call runs.
  EncodedHeader next_header() { return EncodedHeader(headers.at(headers_used++)); }
  bool has_header_slot() const { return headers_used < headers.size(); }
};

class StagingPool {
 public:
  static constexpr std::size_t kMaxBuffers = 4;
  // Waits (handling what arrives) until `done` or the deadline; the engine's poll loop.
  using Wait = std::function<Status(Clock::time_point deadline, const std::function<bool()>& done)>;

  StagingPool(int rank, int ranks) : rank_(rank), ranks_(ranks), posted_(static_cast<std::size_t>(ranks), 0) {}

  // A buffer for the call about to start (its sizes are set by prepare()).
  StagingBuffer* acquire(Transport& transport, bool bounded, std::uint64_t epoch, Clock::time_point deadline,
                         const Wait& wait, Status& status);
  // Sizes the buffer for a call of `count` floats and `sends` sends; no allocation once warm.
  static void prepare(StagingBuffer& b, std::uint64_t count, std::size_t sends, int ranks);
  // Counts a data-lane send posted to `peer` (whichever buffer it reads). Only those: a datagram
  // transport copies its control sends, so they complete at once and out of turn, and counting
  // them would let a buffer look free while data sends queued before them still read it (UCX
  // keeps one queue per peer, where a pending control send holds back the count: safe).
  void note_posted(int peer) { ++posted_[static_cast<std::size_t>(peer)]; }
  // At the end of a call: the buffer is free once the sends posted so far have completed.
  void seal(StagingBuffer& b) const { b.posted_until = posted_; }
  std::size_t bytes() const;

 private:
  bool is_free(const StagingBuffer& b, const Transport& transport) const;

  int rank_, ranks_;
  std::vector<std::uint64_t> posted_;  // per peer: sends posted so far
  std::vector<std::unique_ptr<StagingBuffer>> buffers_;
};

}  // namespace optireduce
