#include "datagram_transport.hpp"

#include <string>

#include "probe.hpp"

namespace optireduce::datagram {
namespace {

// A control message must not wait behind data, and may be lost: it goes at once, twice.
constexpr int kControlCopies = 2;

}  // namespace

Status DatagramTransport::connect(int self_rank, const std::vector<std::vector<std::byte>>& addresses,
                                  Clock::time_point deadline) {
  OR_CHECK(!connected_, invalid, prefixed("connect called twice"));
  OR_CHECK(self_rank >= 0 && static_cast<std::size_t>(self_rank) < addresses.size(), invalid,
           prefixed("rank " + std::to_string(self_rank) + " of " + std::to_string(addresses.size())));
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
  const ProbeSteps steps{[this](const std::vector<int>& peers) { greet(peers); }, [this] { progress(true); },
                         [this](Clock::time_point until) { wait(until); }};
  const Status s = run_probe(handshake_, steps, deadline, describe());
  return s.ok() ? s : Status(s.code(), prefixed(s.message()));
}

std::string DatagramTransport::authentication_mismatch(std::size_t rank, bool theirs, bool ours) const {
  return "OPTIREDUCE_AUTH differs between ranks (rank " + std::to_string(rank) + " has it " + (theirs ? "on" : "off") +
         ", rank " + std::to_string(rank_) + " " + (ours ? "on" : "off") + ")";
}

Status DatagramTransport::send(int peer, Lane lane, std::span<const std::byte> header, std::span<const std::byte> payload) {
  OR_CHECK(connected_, invalid, prefixed("send before connect"));
  OR_CHECK(peer >= 0 && peer < ranks_ && peer != rank_, invalid, prefixed("send to rank " + std::to_string(peer)));
  OR_CHECK(header.size() <= Header::kMaxEngineHeader && header.size() + payload.size() <= max_message_bytes(), invalid,
           prefixed("a message of " + std::to_string(header.size() + payload.size()) + " bytes"));
  if (lane == Lane::control)
    send_control(peer, header, payload, kControlCopies);
  else
    queue_data(peer, header, payload);
  return Status::Ok();
}

std::size_t DatagramTransport::sends_in_flight(int peer) const {
  return connected_ && peer >= 0 && peer < ranks_ ? sends_referencing(peer) : 0;
}

bool DatagramTransport::abandon_queued_sends() { return !connected_ || drop_queued_data(); }

Status DatagramTransport::poll(Clock::time_point deadline, const std::function<void(const InboundMessage&)>& on_message) {
  OR_CHECK(connected_, invalid, prefixed("poll before connect"));
  const ListeningScope listening(*inbound_, on_message);
  const std::size_t before = inbound_->delivered();
  inbound_->deliver_kept();
  // Read at first and whenever a wait does not rule it out: a wait that ended for the pacing or
  // a window's retry only sends, without a read that finds nothing.
  for (bool readable = true;;) {
    progress(readable);
    if (inbound_->delivered() > before) return Status::Ok();
    if (Clock::now() >= deadline) return Timeout(prefixed("nothing arrived before the deadline"));
    readable = wait(deadline);
  }
}

void DatagramTransport::suggest_pace(double bytes_per_s) {
  if (pace_set_ || !(bytes_per_s > 0)) return;  // a set rate wins
  follow_pace(bytes_per_s);
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
