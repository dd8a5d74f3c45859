// The headers of one rank's outgoing datagrams: every kind to one destination draws its sequence
// from one counter (the tag's nonce, so it never repeats), and is tagged for that destination.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "authenticator.hpp"
#include "wire_format.hpp"

namespace optireduce::datagram {

class Sealer {
 public:
  Sealer() = default;
  // `authenticator` null: headers go untagged (authentication off).
  Sealer(Authenticator* authenticator, int self, int ranks)
      : authenticator_(authenticator), self_(self), next_(static_cast<std::size_t>(ranks), 0) {}

  // The header of the next datagram of `kind` to `destination`, lengths from `header` and
  // `payload`, which the tag covers.
  HeaderBytes seal(int destination, Kind kind, std::span<const std::byte> header, std::span<const std::byte> payload);
  // The sequence the next datagram to `destination` gets.
  std::uint64_t next_sequence(int destination) const { return next_[static_cast<std::size_t>(destination)]; }

 private:
  Authenticator* authenticator_ = nullptr;
  int self_ = -1;
  std::vector<std::uint64_t> next_;
};

}  // namespace optireduce::datagram
