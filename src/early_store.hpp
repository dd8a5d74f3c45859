// Messages of a later call that arrive while this rank is still in an earlier one (a peer ahead
// of it). They are kept, bounded, and replayed when this rank gets there. An exact call must not
// lose any of them (nothing resends it), so the budget of each later call comes from that call's
// own size, as its header states, not from this rank's history.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "optireduce/engine/wire_header.hpp"
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

 private:
  struct Message {
    WireHeader header;
    std::vector<std::byte> payload;
  };
  // What one call can bring this rank: all of its contributions and results, twice over for
  // the control messages; never less than kMinCallBudget.
  static std::uint64_t budget_of(const WireHeader& h);
  static constexpr std::uint64_t kMinCallBudget = 4u << 20;

  std::vector<Message> messages_;
  std::vector<std::pair<std::uint64_t, std::uint64_t>> used_;  // (epoch, bytes kept)
  std::size_t bytes_ = 0;
};

}  // namespace optireduce
