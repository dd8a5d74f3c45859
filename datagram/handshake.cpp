#include "handshake.hpp"

namespace optireduce::datagram {

Handshake::Handshake(int self, int ranks)
    : self_(self), heard_(static_cast<std::size_t>(ranks), 0), heard_me_(static_cast<std::size_t>(ranks), 0) {
  if (self >= 0 && self < ranks) heard_[static_cast<std::size_t>(self)] = heard_me_[static_cast<std::size_t>(self)] = 1;
}

bool Handshake::on_hello(int source, std::uint8_t flags) {
  if (source < 0 || static_cast<std::size_t>(source) >= heard_.size() || source == self_) return false;
  const auto s = static_cast<std::size_t>(source);
  heard_[s] = 1;
  if (flags & kHeardYou) heard_me_[s] = 1;
  const std::uint8_t both = kHeardYou | kKnowYouHeardMe;
  return (flags & both) != both;
}

std::uint8_t Handshake::flags_for(int peer) const {
  const auto p = static_cast<std::size_t>(peer);
  return static_cast<std::uint8_t>((heard_[p] ? kHeardYou : 0) | (heard_me_[p] ? kKnowYouHeardMe : 0));
}

std::vector<int> Handshake::pending() const {
  std::vector<int> out;
  for (std::size_t r = 0; r < heard_.size(); ++r)
    if (!heard_[r] || !heard_me_[r]) out.push_back(static_cast<int>(r));
  return out;
}

std::vector<int> Handshake::peers() const {
  std::vector<int> out;
  for (std::size_t r = 0; r < heard_.size(); ++r)
    if (static_cast<int>(r) != self_) out.push_back(static_cast<int>(r));
  return out;
}

std::string Handshake::pending_list() const {
  std::string out;
  for (int r : pending()) out += (out.empty() ? "" : ", ") + std::to_string(r);
  return out;
}

}  // namespace optireduce::datagram
