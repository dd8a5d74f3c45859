// One engine per communicator: its ranks, its transport, its buffers. One operation: reduce a
// float buffer (sum) with the Transpose AllReduce. It knows nothing of MPI.
#pragma once

#include <array>
#include <chrono>
#include <functional>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "bootstrap.hpp"
#include "optireduce/transport.hpp"
#include "shard_layout.hpp"
#include "wire_header.hpp"

namespace optireduce {

struct EngineOptions {
  std::uint32_t chunk_elems = 65536;
  std::chrono::milliseconds timeout{60000};  // hard cap on one call, and on connecting
};

enum class CallStatus { ok, timeout, transport_error, broken };
const char* to_string(CallStatus s);

struct CallStats {
  CallStatus status = CallStatus::ok;
  std::uint64_t entries = 0;          // result entries
  std::uint64_t dropped_entries = 0;  // entries that lacked a contribution (0 when exact)
  double latency_us = 0;
};

// Messages the engine refused, by reason. Never trusted, always counted.
struct RejectCounts {
  std::uint64_t malformed = 0;   // header failed to decode
  std::uint64_t foreign = 0;     // other communicator or job, or an impossible source rank
  std::uint64_t stale = 0;       // a call that is already over
  std::uint64_t misplaced = 0;   // extent or payload length not a chunk this rank expects
  std::uint64_t duplicate = 0;   // a chunk that was already received
  std::uint64_t overflow = 0;    // early data beyond the bounded early store
  std::uint64_t total() const { return malformed + foreign + stale + misplaced + duplicate + overflow; }
};

class Engine {
 public:
  // Collective over the bootstrap's ranks. `transport` is null when this rank could not create
  // one; then, as on any failure of any rank, every rank gets nullptr and `error` says why.
  static std::unique_ptr<Engine> create(int rank, int ranks, std::unique_ptr<Transport> transport,
                                        Bootstrap& bootstrap, const EngineOptions& options, std::string& error);
  ~Engine();
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  // output[i] = sum over ranks of input[i]. input may equal output (in place). Reads input and
  // writes output only while the call runs.
  CallStats allreduce_sum(const float* input, float* output, std::uint64_t count);

  int rank() const { return rank_; }
  int ranks() const { return ranks_; }
  std::uint64_t comm_id() const { return comm_id_; }
  // Bytes of the engine's own reusable buffers (staging and receive slots).
  std::size_t buffer_bytes() const;
  std::size_t largest_call_bytes() const { return largest_call_bytes_; }
  const RejectCounts& rejects() const { return rejects_; }
  const Transport& transport() const { return *transport_; }

 private:
  Engine(int rank, int ranks, std::uint64_t comm_id, std::unique_ptr<Transport> transport, const EngineOptions& options);

  struct EarlyMessage {
    WireHeader header;
    std::vector<std::byte> payload;
  };

  void begin_call(const float* input, float* output, std::uint64_t count);
  void on_message(const InboundMessage& message);
  // Places a validated current-call message; `receive` writes its payload where asked.
  void apply(const WireHeader& h, std::size_t payload_size, const std::function<bool(std::span<std::byte>)>& receive);
  void reduce_chunk(std::uint32_t chunk);
  TransportStatus send_chunk(int peer, Phase phase, const Extent& extent, bool last_slice);
  bool call_complete() const;
  // Marks the engine broken (its peers can no longer be trusted to agree) and logs why.
  CallStats fail(CallStats stats, TransportStatus ts, Clock::time_point start, std::uint64_t count);
  bool sends_drained() const;
  // True when no peer still needs this rank to drive its queued sends: each one either has
  // completed or the peer said it has everything.
  bool peers_served() const;

  const int rank_;
  const int ranks_;
  const std::uint64_t comm_id_;
  std::unique_ptr<Transport> transport_;
  const EngineOptions options_;
  bool broken_ = false;

  std::uint64_t epoch_ = 0;
  std::size_t largest_call_bytes_ = 0;

  // Reused across calls. staging_: this rank's input, then its reduced shard; slots_: the
  // contributions of the other ranks to this rank's shard, one stride per peer.
  std::vector<float> staging_;
  std::vector<float> slots_;
  std::vector<std::array<std::byte, WireHeader::kEncodedSize>> headers_;
  std::size_t headers_used_ = 0;

  // State of the call in progress.
  ShardLayout layout_;
  float* output_ = nullptr;
  std::uint64_t slot_stride_ = 0;
  std::vector<std::uint16_t> contributors_;         // per chunk of the own shard
  std::vector<std::uint8_t> scatter_seen_;          // [source][chunk of own shard]
  std::vector<std::uint8_t> gather_seen_;           // [owner][chunk], stride max_chunks
  std::vector<std::uint32_t> ready_;                // own chunks with every contribution
  std::uint32_t reduced_chunks_ = 0;
  std::uint64_t gather_remaining_ = 0;
  std::vector<std::uint8_t> done_from_;             // peers that said they have all our data

  std::vector<EarlyMessage> early_;
  std::size_t early_bytes_ = 0;
  RejectCounts rejects_;
};

}  // namespace optireduce
