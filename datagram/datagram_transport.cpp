#include "datagram_transport.hpp"

#include <string>

#include "probe.hpp"

namespace optireduce::datagram {

Status DatagramTransport::connect(int self_rank, const std::vector<std::vector<std::byte>>& addresses,
                                  Clock::time_point deadline) {
  OR_CHECK(!connected_, invalid, std::string(name_) + ": connect called twice");
  OR_CHECK(self_rank >= 0 && static_cast<std::size_t>(self_rank) < addresses.size(), invalid,
           std::string(name_) + ": rank " + std::to_string(self_rank) + " of " + std::to_string(addresses.size()));
  rank_ = self_rank;
  ranks_ = static_cast<int>(addresses.size());
  OR_RETURN_IF_ERROR(open_paths(addresses));
  connected_ = true;
  return probe(deadline);
}

Status DatagramTransport::key_job(bool authenticate, const Secret& job_secret) {
  if (authenticate) {
    Status s;
    authenticator_ = Authenticator::create(job_secret, rank_, ranks_, s);
    OR_RETURN_IF_ERROR(s);
  }
  sealer_ = Sealer(authenticator_.get(), rank_, ranks_);
  handshake_ = Handshake(rank_, ranks_);
  return Status::Ok();
}

// A datagram to a rank not yet polling waits in its socket buffer; data that arrives meanwhile is
// kept for the first poll().
Status DatagramTransport::probe(Clock::time_point deadline) {
  const ProbeSteps steps{[this](const std::vector<int>& peers) { greet(peers); }, [this] { probe_progress(); },
                         [this](Clock::time_point until) { probe_wait(until); }};
  const Status s = run_probe(handshake_, steps, deadline, describe());
  return s.ok() ? s : Status(s.code(), std::string(name_) + ": " + s.message());
}

std::string DatagramTransport::authentication_mismatch(std::size_t rank, bool theirs, bool ours) const {
  return "OPTIREDUCE_AUTH differs between ranks (rank " + std::to_string(rank) + " has it " + (theirs ? "on" : "off") +
         ", rank " + std::to_string(rank_) + " " + (ours ? "on" : "off") + ")";
}

TransportTraits DatagramTransport::traits() const {
  TransportTraits t;
  t.reliable = false;
  t.ordered = false;
  t.can_abandon_sends = true;
  t.max_message_bytes = max_message_bytes();
  return t;
}

TransportCounters DatagramTransport::counters() const {
  TransportCounters c = counters_;
  c.pace_bytes_per_s = bucket_.rate();
  return c;
}

}  // namespace optireduce::datagram
