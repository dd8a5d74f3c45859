// Selective repeat inside a bounded call's deadline, over transports that may lose data. Once a
// phase holds every sender's last slices, what it still lacks is lost rather than in flight: the
// receiver asks each sender for those chunks, and asks again if they have not come a round trip
// later (never past the phase's deadline). A sender answers from what its call still holds (the staged input, the
// reduced shard) for as long as that call runs. A lost datagram then costs a round trip instead
// of the rest of the deadline and the data. Both sides are bounded: `rounds` requests per phase
// and peer, each listing at most the chunks of one shard, and a sender serves no more than that.
#pragma once

#include <array>
#include <cstdint>
#include <span>
#include <vector>

#include "optireduce/engine/deadlines/controller.hpp"
#include "optireduce/engine/tar/wire_header.hpp"
#include "optireduce/transport.hpp"

namespace optireduce {

// The most rounds a setting may ask for (OPTIREDUCE_RESEND_ROUNDS).
constexpr unsigned kMaxResendRounds = (WireHeader::kResendRoundMask >> WireHeader::kResendRoundShift) + 1;

class Resends {
 public:
  // Per call: `rounds` requests per phase at most (0: never ask, never answer).
  void begin(int ranks, unsigned rounds);
  unsigned rounds() const { return rounds_; }

  // Requester. The first round of a phase is due once its last slices are all in, each later one
  // `wait` after the one before, none at or past the phase's deadline; `wait` after the last round
  // the phase closes with what it has (DeadlineController::resend_wait_us).
  bool due(std::size_t phase, Clock::time_point now, Clock::time_point phase_deadline, Clock::duration wait) const;
  // When the next round is due (time_point::max() once every round was asked).
  Clock::time_point next_due(std::size_t phase, Clock::duration wait) const;
  // Once every round was asked: when the phase stops waiting for what it asked for.
  Clock::time_point gives_up_at(std::size_t phase, Clock::duration wait) const { return last_asked_[phase] + wait; }
  bool all_asked(std::size_t phase) const { return asked_[phase] >= rounds_; }
  void note_asked(std::size_t phase, Clock::time_point now);
  unsigned asked(std::size_t phase) const { return asked_[phase]; }
  // The request payload for `chunks` (u32 little-endian each), in storage reused from call to call.
  std::span<const std::byte> encode(std::span<const std::uint32_t> chunks);
  std::vector<std::uint32_t>& list() { return list_; }  // scratch for building a request

  // Sender. Takes round `round` of `peer`'s requests for `phase`; false for a round beyond the
  // rounds or one already served (requests travel twice on a datagram control lane).
  bool take(int peer, std::size_t phase, unsigned round);
  // The chunk indices of a received request, each below `chunks`; false (nothing decoded) when
  // the list is longer than `chunks` or names a chunk that does not exist.
  bool decode(const InboundMessage& message, std::uint32_t count, std::uint32_t chunks);
  std::span<const std::uint32_t> decoded() const { return decoded_; }

  // Monotonic over the engine's life, for the report.
  std::uint64_t requests_sent = 0;   // lists sent
  std::uint64_t chunks_asked = 0;    // chunks those lists named
  std::uint64_t chunks_resent = 0;   // chunks sent again on a peer's request

 private:
  unsigned rounds_ = 0;
  std::array<unsigned, kTarPhases> asked_{};
  std::array<Clock::time_point, kTarPhases> last_asked_{};
  std::vector<std::uint8_t> served_;  // [peer][phase]: bit r set once round r was served this call
  std::vector<std::uint32_t> list_, decoded_;
  std::vector<std::byte> bytes_;
};

}  // namespace optireduce
