// The steps of connect() that both datagram transports (udp/, ofi/) take alike: the call's
// arguments checked, and, once every rank's address is read, the job keyed (rank 0's secret,
// when authentication is on), its sealer and its handshake made.
#pragma once

#include <cstddef>
#include <memory>

#include "authenticator.hpp"
#include "handshake.hpp"
#include "optireduce/status.hpp"
#include "sealer.hpp"

namespace optireduce::datagram {

// Once per transport, and a rank within the job: on success rank and ranks are set.
Status take_rank(const char* transport, bool connected, int self_rank, std::size_t addresses, int& rank, int& ranks);

// authenticator (null when !authenticate), then sealer and handshake, for `rank` of `ranks`.
Status key_job(bool authenticate, const Secret& job_secret, int rank, int ranks,
               std::unique_ptr<Authenticator>& authenticator, Sealer& sealer, Handshake& handshake);

}  // namespace optireduce::datagram
