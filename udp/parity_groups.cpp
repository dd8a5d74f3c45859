#include "parity_groups.hpp"

#include "optireduce/datagram/wire_format.hpp"

namespace optireduce::udp {

std::size_t ParityGroups::parity_room() const {
  return group_ ? datagram::Header::kSize + datagram::ParityEncoder::table_bytes(group_) : 0;
}

bool ParityGroups::add(std::uint64_t sequence, const Outgoing& datagram, Clock::time_point now) {
  auto& e = encoders_[static_cast<std::size_t>(datagram.peer)];
  if (!e.open()) opened_[static_cast<std::size_t>(datagram.peer)] = now;
  const std::span<const std::byte> pieces[] = {datagram.head, datagram.header, datagram.payload};
  e.add(sequence, pieces);
  return e.full();
}

void ParityGroups::close(int peer, std::vector<std::byte>& table, std::vector<std::byte>& parity) {
  encoders_[static_cast<std::size_t>(peer)].finish(table, parity);
}

std::vector<int> ParityGroups::lingering(Clock::time_point now) const {
  std::vector<int> out;
  for (std::size_t p = 0; p < encoders_.size(); ++p)
    if (encoders_[p].open() && now - opened_[p] >= kLinger) out.push_back(static_cast<int>(p));
  return out;
}

Clock::time_point ParityGroups::next_close() const {
  auto at = Clock::time_point::max();
  for (std::size_t p = 0; p < encoders_.size(); ++p)
    if (encoders_[p].open()) at = std::min(at, opened_[p] + std::chrono::duration_cast<Clock::duration>(kLinger));
  return at;
}

void ParityGroups::drop_open() {
  std::vector<std::byte> table, parity;
  for (auto& e : encoders_)
    if (e.open()) e.finish(table, parity);
}

}  // namespace optireduce::udp
