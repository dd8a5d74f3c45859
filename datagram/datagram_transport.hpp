// What both datagram transports (udp/, ofi/) are alike in: the state a connected datagram
// transport keeps (the job's key, its sealer and handshake, a flow window per peer, the pace, the
// one receive dispatch and inbound handler, the counters) and the calls of the Transport
// interface whose rules are the same for both: connect() (the call checked, the transport's own
// step, then the reachability probe), send()'s checks and its control lane, poll()'s loop, what
// may be abandoned before connect(), and pacing that a set rate overrides. What a transport
// does to put a datagram on its network, read one off it and wait for it is its own.
#pragma once

#include <cstddef>
#include <functional>
#include <memory>
#include <span>
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
  // Checked (connected, a peer, a size one datagram carries), then queued or, on the control
  // lane, sent at once.
  Status send(int peer, Lane lane, std::span<const std::byte> header, std::span<const std::byte> payload) final;
  std::size_t sends_in_flight(int peer) const final;
  bool abandon_queued_sends() final;
  // Progress and waits until a message was delivered or `deadline` passed.
  Status poll(Clock::time_point deadline, const std::function<void(const InboundMessage&)>& on_message) final;
  // Unreliable, unordered, queued sends abandonable: what every datagram transport is.
  TransportTraits traits() const final;
  // Followed unless the user set a rate.
  void suggest_pace(double bytes_per_s) final;
  TransportCounters counters() const override;

 protected:
  // `name` prefixes the errors ("udp", "ofi"); `pace` is the pacing before calibration;
  // `pace_set` says the user set it, so calibration's suggestions are ignored.
  DatagramTransport(const char* name, const TokenBucket& pace, bool pace_set)
      : bucket_(pace), pace_set_(pace_set), name_(name) {}

  // connect()'s step of each transport, with rank_ and ranks_ set: every rank's address read, the
  // path to each chosen and opened, the job keyed (key_job).
  virtual Status open_paths(const std::vector<std::vector<std::byte>>& addresses) = 0;
  // The largest engine header and payload one datagram carries on the connected path.
  virtual std::size_t max_message_bytes() const = 0;

  // The probe's hellos: one to each of `peers`, sent at once.
  virtual void greet(const std::vector<int>& peers) = 0;
  // A checked message of the control lane, `copies` times, sent at once ahead of queued data.
  virtual void send_control(int peer, std::span<const std::byte> header, std::span<const std::byte> payload,
                            int copies) = 0;
  // A checked message of the data lane queued behind the peer's window and the pace; the payload
  // is the engine's and may be referenced until the datagram leaves.
  virtual void queue_data(int peer, std::span<const std::byte> header, std::span<const std::byte> payload) = 0;
  // Sends to a valid `peer` that still reference the engine's memory.
  virtual std::size_t sends_referencing(int peer) const = 0;
  // Drops the queued data of a connected transport; true when no send references the engine's
  // memory any more.
  virtual bool drop_queued_data() = 0;

  // Sends what may leave and, unless `readable` is false (a wait said there is nothing to read),
  // reads what arrived; for poll() and the probe alike.
  virtual void progress(bool readable) = 0;
  // Blocks until a datagram may have arrived, a queued send may leave, or `until`; false when
  // there is known to be nothing to read.
  virtual bool wait(Clock::time_point until) = 0;
  // The pace calibration measured (never called when the user set one).
  virtual void follow_pace(double bytes_per_s) = 0;

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
  std::string prefixed(const std::string& what) const { return std::string(name_) + ": " + what; }

  bool pace_set_;
  const char* name_;
};

}  // namespace optireduce::datagram
