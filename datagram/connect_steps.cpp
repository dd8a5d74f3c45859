#include "connect_steps.hpp"

#include <string>

namespace optireduce::datagram {

Status take_rank(const char* transport, bool connected, int self_rank, std::size_t addresses, int& rank, int& ranks) {
  OR_CHECK(!connected, invalid, std::string(transport) + ": connect called twice");
  OR_CHECK(self_rank >= 0 && static_cast<std::size_t>(self_rank) < addresses, invalid,
           std::string(transport) + ": rank " + std::to_string(self_rank) + " of " + std::to_string(addresses));
  rank = self_rank;
  ranks = static_cast<int>(addresses);
  return Status::Ok();
}

Status key_job(bool authenticate, const Secret& job_secret, int rank, int ranks,
               std::unique_ptr<Authenticator>& authenticator, Sealer& sealer, Handshake& handshake) {
  if (authenticate) {
    Status s;
    authenticator = Authenticator::create(job_secret, rank, ranks, s);
    OR_RETURN_IF_ERROR(s);
  }
  sealer = Sealer(authenticator.get(), rank, ranks);
  handshake = Handshake(rank, ranks);
  return Status::Ok();
}

}  // namespace optireduce::datagram
