#include "optireduce/engine/tar/resend.hpp"

#include <cstring>

#include "optireduce/byte_order.hpp"

namespace optireduce {

void Resends::begin(int ranks, unsigned rounds) {
  rounds_ = rounds;
  asked_.fill(0);
  served_.assign(static_cast<std::size_t>(ranks) * kTarPhases, 0);
}

Clock::time_point Resends::next_due(std::size_t phase, Clock::duration wait) const {
  const unsigned k = asked_[phase];
  if (k >= rounds_) return Clock::time_point::max();
  if (k == 0) return Clock::time_point::min();
  return last_asked_[phase] + wait;
}

bool Resends::due(std::size_t phase, Clock::time_point now, Clock::time_point phase_deadline, Clock::duration wait) const {
  return now < phase_deadline && next_due(phase, wait) <= now;
}

void Resends::note_asked(std::size_t phase, Clock::time_point now) {
  ++asked_[phase];
  last_asked_[phase] = now;
}

std::span<const std::byte> Resends::encode(std::span<const std::uint32_t> chunks) {
  bytes_.resize(chunks.size() * sizeof(std::uint32_t));
  ByteWriter w(bytes_.data());
  for (std::uint32_t c : chunks) w.put<std::uint32_t>(c);
  return bytes_;
}

bool Resends::take(int peer, std::size_t phase, unsigned round) {
  static_assert(kMaxResendRounds <= 8, "one bit per round");
  const std::size_t i = static_cast<std::size_t>(peer) * kTarPhases + phase;
  if (i >= served_.size() || round >= rounds_) return false;
  const auto bit = static_cast<std::uint8_t>(1u << round);
  if (served_[i] & bit) return false;
  served_[i] |= bit;
  return true;
}

bool Resends::decode(const InboundMessage& message, std::uint32_t count, std::uint32_t chunks) {
  decoded_.clear();
  if (count > chunks || message.payload_size != std::size_t{count} * sizeof(std::uint32_t)) return false;
  bytes_.resize(message.payload_size);
  if (!message.copy_payload(bytes_)) return false;
  ByteReader r(bytes_.data());
  for (std::uint32_t i = 0; i < count; ++i) {
    const auto c = r.get<std::uint32_t>();
    if (c >= chunks) {
      decoded_.clear();
      return false;
    }
    decoded_.push_back(c);
  }
  return true;
}

}  // namespace optireduce
