// Messages of a later call that arrive while this rank is still in an earlier one (a peer ahead
// of it). They are kept, bounded, and replayed when this rank gets there. An exact call must not
// lose any of them (nothing resends it), so the budget of each later call comes from that call's
// own size, as its header states, not from this rank's history.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <vector>

#include "optireduce/engine/tar/wire_header.hpp"
#include "optireduce/transport.hpp"

namespace optireduce {

class EarlyStore {
 public:
  // A bounded call keeps data of calls at most this far ahead.
  static constexpr std::uint64_t kMaxEpochsAhead = 4;

  // Keeps a message of `epoch` > current. False when it is beyond the store's bounds.
  bool keep(const WireHeader& h, std::uint64_t current_epoch, const InboundMessage& message);
  // Hands every kept message of `epoch` to `apply` (and forgets those before it).
  void replay(std::uint64_t epoch, const std::function<void(const WireHeader&, std::span<const std::byte>)>& apply,
              std::uint64_t& stale);
  bool empty() const { return messages_.empty(); }
  std::size_t size() const { return messages_.size(); }
  std::size_t bytes() const { return bytes_; }
  // Bytes of payload buffers held for reuse (at most the most ever kept at once).
  std::size_t spare_bytes() const { return spare_bytes_; }

 private:
  // A payload buffer, never value-initialised: it is written whole before it is read. Buffers
  // go back to spares_ after their replay, so a job whose ranks drift apart by a call reuses
  // them instead of allocating (and faulting in) fresh memory for every early chunk.
  struct Buffer {
    std::unique_ptr<std::byte[]> data;
    std::size_t capacity = 0;
  };
  struct Message {
    WireHeader header;
    Buffer buffer;
    std::size_t size = 0;
    std::span<const std::byte> payload() const { return {buffer.data.get(), size}; }
  };
  Buffer take_buffer(std::size_t size);
  void give_back(Buffer buffer);
  // What one call can bring this rank: all of its contributions and results, twice over for
  // the control messages; never less than kMinCallBudget.
  static std::uint64_t budget_of(const WireHeader& h);
  static constexpr std::uint64_t kMinCallBudget = 4u << 20;

  std::vector<Message> messages_;
  std::vector<Message> replaying_;  // messages_ during a replay (kept for its capacity)
  std::vector<Buffer> spares_;
  std::size_t spare_bytes_ = 0, peak_bytes_ = 0;  // spares never exceed what was once kept
  std::vector<std::pair<std::uint64_t, std::uint64_t>> used_;  // (epoch, bytes kept)
  std::size_t bytes_ = 0;
};

}  // namespace optireduce
