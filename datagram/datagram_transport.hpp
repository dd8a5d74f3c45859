// What both datagram transports (udp/, ofi/) are alike in: the state a connected datagram
// transport keeps (the job's key, its sealer and handshake, a flow window per peer, the pace, the
// one receive dispatch and inbound handler, the counters) and connect() itself: the call checked,
// the transport's own step (every rank's address read, the path to each opened, the job keyed),
// then the reachability probe, whose sending, progress and waiting are the transport's.
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include "authenticator.hpp"
#include "dispatch.hpp"
#include "flow_window.hpp"
#include "handshake.hpp"
#include "inbound_handler.hpp"
#include "optireduce/status.hpp"
#include "optireduce/transport.hpp"
#include "sealer.hpp"
#include "token_bucket.hpp"

namespace optireduce::datagram {

class DatagramTransport : public Transport, protected ControlReplies {
 public:
  std::vector<std::byte> local_address() const override { return address_; }
  Status connect(int self_rank, const std::vector<std::vector<std::byte>>& addresses, Clock::time_point deadline) final;
  // Unreliable, unordered, queued sends abandonable: what every datagram transport is.
  TransportTraits traits() const final;
  TransportCounters counters() const override;

 protected:
  // `name` prefixes connect()'s errors ("udp", "ofi"); `pace` is the pacing before calibration.
  DatagramTransport(const char* name, const TokenBucket& pace) : bucket_(pace), name_(name) {}

  // connect()'s step of each transport, with rank_ and ranks_ set: every rank's address read, the
  // path to each chosen and opened, the job keyed (key_job).
  virtual Status open_paths(const std::vector<std::vector<std::byte>>& addresses) = 0;
  // The reachability probe's steps: a hello to each of `peers`, sent at once; send what is queued
  // and read what arrived; block until a datagram arrives or `until`.
  virtual void greet(const std::vector<int>& peers) = 0;
  virtual void probe_progress() = 0;
  virtual void probe_wait(Clock::time_point until) = 0;
  // The largest engine header and payload one datagram carries on the connected path.
  virtual std::size_t max_message_bytes() const = 0;

  // Every rank's address decoded (by the decode() of the address's own namespace), each checked to
  // tag as this rank does (`authenticate`): a rank that does not would see every datagram rejected.
  template <typename Address>
  Status read_addresses(const std::vector<std::vector<std::byte>>& blobs, bool authenticate,
                        std::vector<Address>& out) const {
    out.assign(blobs.size(), {});
    for (std::size_t r = 0; r < blobs.size(); ++r) {
      const Status s = decode(blobs[r], out[r]);
      OR_CHECK(s.ok(), invalid, "rank " + std::to_string(r) + ": " + s.message());
      OR_CHECK(out[r].authenticate == authenticate, invalid, authentication_mismatch(r, out[r].authenticate, authenticate));
    }
    return Status::Ok();
  }
  // The authenticator (none when !authenticate), then the sealer and the handshake, keyed with
  // rank 0's secret.
  Status key_job(bool authenticate, const Secret& job_secret);

  std::vector<std::byte> address_;
  Secret secret_{};
  bool connected_ = false;
  int rank_ = -1;
  int ranks_ = 0;
  std::unique_ptr<Authenticator> authenticator_;
  Sealer sealer_;
  Handshake handshake_;
  std::vector<FlowWindow> windows_;
  TokenBucket bucket_;
  TransportCounters counters_;
  std::unique_ptr<ReceiveDispatch> dispatch_;
  std::unique_ptr<InboundHandler> inbound_;  // last: it refers to the handshake and the windows

 private:
  Status probe(Clock::time_point deadline);
  std::string authentication_mismatch(std::size_t rank, bool theirs, bool ours) const;

  const char* name_;
};

}  // namespace optireduce::datagram
