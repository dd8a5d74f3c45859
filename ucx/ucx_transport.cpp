#include "optireduce/ucx/ucx_transport.hpp"

#include <poll.h>
#include <sched.h>
#include <ucp/api/ucp.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>

#include "optireduce/log.hpp"
#include "optireduce/poll_until.hpp"
#include "optireduce/ucx/ucx_context.hpp"
#include "optireduce/ucx/ucx_lanes.hpp"
#include "optireduce/ucx/ucx_transport_impl.hpp"

namespace optireduce::ucx::detail {

UcxTransport::~UcxTransport() { close(); }

void UcxTransport::close() {
  if (!worker_) return;
  OR_LOG(debug, "UCX transport closing: %llu messages received, %llu of them by rendezvous, %llu from UCX's receive buffer",
         static_cast<unsigned long long>(counters_.messages_received), static_cast<unsigned long long>(received_rendezvous_),
         static_cast<unsigned long long>(delivered_));
  // Flush what we sent, bounded, then close without a handshake that could wait on a dead peer;
  // after an abandoned fetch nothing that progresses the worker (abandon_fetch).
  if (!abandoned_) close_endpoints(Clock::now() + kCloseTimeout);
  for (auto& a : inbox_)
    if (a.ucx_data) ucp_am_data_release(worker_, a.ucx_data);
  inbox_.clear();
  for (const Flush& f : flushes_) ucp_request_free(f.request);
  flushes_.clear();
  ucp_worker_destroy(worker_);
  worker_ = nullptr;
}

void UcxTransport::close_endpoints(Clock::time_point deadline) {
  // Waits as poll() does (the peers close too, and may need this core to drain what it waits for).
  ucp_request_param_t param{};
  void* flush = ucp_worker_flush_nbx(worker_, &param);
  if (UCS_PTR_IS_PTR(flush)) {
    while (ucp_request_check_status(flush) == UCS_INPROGRESS && Clock::now() < deadline) wait_for_events(deadline, WhenBusy::sleep);
    ucp_request_free(flush);
  }
  std::vector<void*> closing;
  for (ucp_ep_h ep : endpoints_) {
    if (!ep) continue;
    ucp_request_param_t close_param{};
    close_param.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS;
    close_param.flags = UCP_EP_CLOSE_FLAG_FORCE;
    void* req = ucp_ep_close_nbx(ep, &close_param);
    if (UCS_PTR_IS_PTR(req)) closing.push_back(req);
  }
  for (void* req : closing) {
    while (ucp_request_check_status(req) == UCS_INPROGRESS && Clock::now() < deadline) wait_for_events(deadline, WhenBusy::sleep);
    ucp_request_free(req);
  }
}

Status UcxTransport::start(const UcxSettings& settings) {
  Status status;
  context_ = acquire_context(settings.chunk_bytes, status);
  if (!context_) return status;
  ucp_worker_params_t wparams{};
  wparams.field_mask = UCP_WORKER_PARAM_FIELD_THREAD_MODE | UCP_WORKER_PARAM_FIELD_EVENTS;
  wparams.thread_mode = UCS_THREAD_MODE_SINGLE;  // one engine call at a time drives this worker
  wparams.events = UCP_WAKEUP_RX | UCP_WAKEUP_TX;
  ucs_status_t st = ucp_worker_create(context_->handle(), &wparams, &worker_);
  OR_CHECK(st == UCS_OK, unavailable, std::string("ucp_worker_create: ") + ucs_status_string(st));
  if (ucp_worker_get_efd(worker_, &event_fd_) != UCS_OK) event_fd_ = -1;
  for (auto [id, cb] : {std::pair{kDataAmId, &UcxTransport::on_data}, std::pair{kHelloAmId, &UcxTransport::on_hello}}) {
    ucp_am_handler_param_t h{};
    h.field_mask = UCP_AM_HANDLER_PARAM_FIELD_ID | UCP_AM_HANDLER_PARAM_FIELD_CB | UCP_AM_HANDLER_PARAM_FIELD_ARG |
                   UCP_AM_HANDLER_PARAM_FIELD_FLAGS;
    h.id = id;
    h.cb = cb;
    h.arg = this;
    h.flags = UCP_AM_FLAG_WHOLE_MSG;
    st = ucp_worker_set_am_recv_handler(worker_, &h);
    OR_CHECK(st == UCS_OK, unavailable, std::string("ucp_worker_set_am_recv_handler: ") + ucs_status_string(st));
  }
  ucp_address_t* address = nullptr;
  std::size_t length = 0;
  st = ucp_worker_get_address(worker_, &address, &length);
  OR_CHECK(st == UCS_OK, unavailable, std::string("ucp_worker_get_address: ") + ucs_status_string(st));
  const auto* bytes = reinterpret_cast<const std::byte*>(address);
  address_.assign(bytes, bytes + length);
  ucp_worker_release_address(worker_, address);
  return {};
}

int UcxTransport::rank_of(ucp_ep_h ep) const {
  if (!ep) return -1;
  for (std::size_t p = 0; p < endpoints_.size(); ++p)
    if (endpoints_[p] == ep) return static_cast<int>(p);
  return -1;
}

ucs_status_t UcxTransport::on_data(void* arg, const void* header, std::size_t header_length, void* data,
                                   std::size_t length, const ucp_am_recv_param_t* param) {
  auto* self = static_cast<UcxTransport*>(arg);
  // A message counts as from rank p only when it came on the endpoint connected to p: a stranger
  // who reaches the worker's port has an endpoint of its own.
  const int source = (param->recv_attr & UCP_AM_RECV_ATTR_FIELD_REPLY_EP) ? self->rank_of(param->reply_ep) : -1;
  if (source < 0) {
    ++self->counters_.rejected_unauthenticated;
    return UCS_OK;
  }
  const auto* h = static_cast<const std::byte*>(header);
  const bool held_by_ucx = param->recv_attr & (UCP_AM_RECV_ATTR_FLAG_DATA | UCP_AM_RECV_ATTR_FLAG_RNDV);
  // UCX lends this payload only until the callback returns. Inside poll(), with nothing queued
  // before it from any peer (order is kept), the engine takes it from UCX's own receive buffer
  // now, with nothing allocated; otherwise it is copied and waits for the next poll().
  if (!held_by_ucx && self->delivers_in_callback()) {
    self->deliver_in_callback(source, {h, header_length}, {static_cast<const std::byte*>(data), length});
    return UCS_OK;
  }
  Arrived a;
  a.source = source;
  a.arrived = Clock::now();
  a.header.assign(h, h + header_length);
  a.length = length;
  // Keep UCX's descriptor instead of copying; deliver outside this callback (never progress UCX
  // or send from inside its own callbacks). A rendezvous payload is fetched only once the engine
  // has validated the header and named the destination.
  if (held_by_ucx) {
    a.rendezvous = param->recv_attr & UCP_AM_RECV_ATTR_FLAG_RNDV;
    self->received_rendezvous_ += a.rendezvous;
    a.ucx_data = data;
    self->inbox_.push_back(std::move(a));
    return UCS_INPROGRESS;
  }
  const auto* d = static_cast<const std::byte*>(data);
  a.copy.assign(d, d + length);
  self->inbox_.push_back(std::move(a));
  return UCS_OK;
}

void UcxTransport::deliver_in_callback(int source, std::span<const std::byte> header, std::span<const std::byte> payload) {
  InboundMessage m;
  m.source = source;
  m.header = header;
  m.payload_size = payload.size();
  m.payload = payload;
  m.arrived = Clock::now();
  in_callback_ = true;
  hand_over(m, *handler_);
  in_callback_ = false;
  ++delivered_;
}

void UcxTransport::hand_over(const InboundMessage& m, const std::function<void(const InboundMessage&)>& on_message) {
  ++counters_.messages_received;
  counters_.bytes_received += m.header.size() + m.payload_size;
  delivering_ = true;
  on_message(m);
  delivering_ = false;
}

ucs_status_t UcxTransport::on_hello(void* arg, const void* header, std::size_t header_length, void*, std::size_t,
                                    const ucp_am_recv_param_t* param) {
  auto* self = static_cast<UcxTransport*>(arg);
  std::int32_t from = -1;
  if (header_length == sizeof from) std::memcpy(&from, header, sizeof from);
  const int source = (param->recv_attr & UCP_AM_RECV_ATTR_FIELD_REPLY_EP) ? self->rank_of(param->reply_ep) : -1;
  if (from >= 0 && from == source) self->hello_from_[from] = 1;
  return UCS_OK;
}

void UcxTransport::on_send_done(void* request, ucs_status_t status, void* user_data) {
  ucp_request_free(request);  // freeing earlier would suppress this callback
  auto* ctx = static_cast<SendContext*>(user_data);
  if (status != UCS_OK) ctx->self->failed_ = true;
  --ctx->self->in_flight_[ctx->peer];
  ++ctx->self->sends_completed_;
}

void UcxTransport::on_peer_error(void* arg, ucp_ep_h, ucs_status_t status) {
  auto* ctx = static_cast<SendContext*>(arg);
  OR_LOG(debug, "UCX reports peer %d failed: %s", ctx->peer, ucs_status_string(status));
  ctx->self->failed_ = true;
}

bool UcxTransport::handshake_done(int self_rank) const {
  if (failed_) return false;
  for (std::size_t p = 0; p < endpoints_.size(); ++p)
    if (static_cast<int>(p) != self_rank && (!hello_from_[p] || in_flight_[p])) return false;
  return true;
}

Status UcxTransport::connect(int self_rank, const std::vector<std::vector<std::byte>>& peers, Clock::time_point deadline) {
  const std::size_t n = peers.size();
  endpoints_.assign(n, nullptr);
  in_flight_.assign(n, 0);
  hello_from_.assign(n, 0);
  send_contexts_.resize(n);
  for (std::size_t p = 0; p < n; ++p) send_contexts_[p] = {this, static_cast<int>(p)};
  for (std::size_t p = 0; p < n; ++p) {
    if (static_cast<int>(p) == self_rank) continue;
    ucp_ep_params_t ep{};
    ep.field_mask = UCP_EP_PARAM_FIELD_REMOTE_ADDRESS | UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE | UCP_EP_PARAM_FIELD_ERR_HANDLER;
    ep.address = reinterpret_cast<const ucp_address_t*>(peers[p].data());
    ep.err_mode = UCP_ERR_HANDLING_MODE_NONE;
    ep.err_handler.cb = &UcxTransport::on_peer_error;
    ep.err_handler.arg = &send_contexts_[p];
    const ucs_status_t st = ucp_ep_create(worker_, &ep, &endpoints_[p]);
    OR_CHECK(st == UCS_OK, unavailable, "ucp_ep_create to rank " + std::to_string(p) + ": " + ucs_status_string(st));
  }
  // Handshake: a hello to every peer and one from every peer proves both directions work.
  hello_header_ = self_rank;
  for (std::size_t p = 0; p < n; ++p)
    if (static_cast<int>(p) != self_rank)
      OR_RETURN_IF_ERROR(post(static_cast<int>(p), kHelloAmId, {reinterpret_cast<const std::byte*>(&hello_header_), sizeof hello_header_}, {}));
  for (;;) {
    progress_all();
    if (handshake_done(self_rank)) break;
    if (failed_ || Clock::now() >= deadline) {
      std::string missing;
      for (std::size_t p = 0; p < n; ++p)
        if (static_cast<int>(p) != self_rank && (!hello_from_[p] || in_flight_[p]))
          missing += " " + std::to_string(p) + (hello_from_[p] ? "(send pending)" : "(no hello)");
      return PeerError(std::string("UCX connection handshake incomplete") + (failed_ ? " (peer failure)" : "") + "; ranks:" + missing);
    }
    wait_for_events(deadline);
  }
  // Data of a peer that finished its handshake first may already be in the inbox: it stays there
  // for the first call.
  description_ = lanes_in_use(endpoints_);
  shared_memory_ = only_shared_memory(description_);
  protocol_ = SendProtocol::choose(description_, !context_->eager_only());
  OR_LOG(info, "UCX transports in use: %s", description_.c_str());
  return {};
}

Status UcxTransport::send(int peer, Lane, std::span<const std::byte> header, std::span<const std::byte> payload) {
  if (in_callback_) {
    OR_CHECK(!failed_, peer, "a UCX endpoint failed");
    deferred_.push_back({peer, header, payload});
    ++in_flight_[peer];
  } else {
    OR_RETURN_IF_ERROR(post(peer, kDataAmId, header, payload));
  }
  ++counters_.messages_sent;
  counters_.bytes_sent += header.size() + payload.size();
  return {};
}

Status UcxTransport::post(int peer, unsigned am_id, std::span<const std::byte> header, std::span<const std::byte> payload) {
  OR_CHECK(!failed_, peer, "a UCX endpoint failed");
  ucp_request_param_t param{};
  param.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA | UCP_OP_ATTR_FIELD_FLAGS;
  param.cb.send = &UcxTransport::on_send_done;
  param.user_data = &send_contexts_[peer];
  // Reply: the receiver learns the endpoint it came on, which is how it knows the sender.
  param.flags = UCP_AM_SEND_FLAG_REPLY | protocol_.flag(payload.size());
  void* req = ucp_am_send_nbx(endpoints_[peer], am_id, header.data(), header.size(), payload.data(), payload.size(), &param);
  if (req == nullptr) return {};
  if (UCS_PTR_IS_ERR(req)) {
    failed_ = true;
    return PeerError("ucp_am_send_nbx to rank " + std::to_string(peer) + ": " + ucs_status_string(UCS_PTR_STATUS(req)));
  }
  ++in_flight_[peer];  // on_send_done counts it down and frees the request
  return {};
}

unsigned UcxTransport::progress_once() {
  if (abandoned_) return 0;  // abandon_fetch: this worker is never progressed again
  const unsigned events = ucp_worker_progress(worker_);
  if (!deferred_.empty()) post_deferred();
  return events;
}

void UcxTransport::post_deferred() {
  // post() never progresses the worker, so nothing is deferred while this runs.
  for (const DeferredSend& d : deferred_) {
    --in_flight_[d.peer];  // post() counts it again if UCX keeps the buffers
    if (!post(d.peer, kDataAmId, d.header, d.payload).ok()) OR_LOG(debug, "a deferred send to rank %d failed", d.peer);
  }
  deferred_.clear();
}

void UcxTransport::progress_all() {
  while (progress_once() != 0) {
  }
}

void UcxTransport::wait_for_events(Clock::time_point deadline, WhenBusy when_busy) {
  const auto spin_until = std::min(deadline, Clock::now() + kSpinBeforeBlock);
  while (Clock::now() < spin_until) {
    if (progress_once() != 0) return;
    sched_yield();
  }
  if (event_fd_ < 0) return;
  pollfd pfd{event_fd_, POLLIN, 0};
  if (ucp_worker_arm(worker_) == UCS_ERR_BUSY) {
    // Events pending, or (what a spin without any then means) sends UCX cannot push yet, which
    // the peer draining its FIFO does not signal here, nor does the fd (unarmed, it reads as
    // ready). Returning makes the caller look again at once: a spin, with a yield per look.
    if (when_busy == WhenBusy::progress_again || progress_once() != 0) return;
    pfd.fd = -1;  // ppoll() ignores it: a plain sleep
    poll_until(pfd, std::min(deadline, Clock::now() + kMaxBlockWhileSending));
    return;
  }
  const bool sending = !flushes_.empty() || std::any_of(in_flight_.begin(), in_flight_.end(), [](std::size_t n) { return n != 0; });
  const Clock::duration longest = sending ? Clock::duration(kMaxBlockWhileSending) : Clock::duration(kMaxBlock);
  poll_until(pfd, std::min(deadline, Clock::now() + longest));
}

void UcxTransport::deliver(Arrived& a, const std::function<void(const InboundMessage&)>& on_message) {
  InboundMessage m;
  m.source = a.source;
  m.header = a.header;
  m.payload_size = a.length;
  m.arrived = a.arrived;
  if (a.rendezvous) {
    m.payload_held = false;
    m.fetch = [this, &a](std::span<std::byte> dst) { return fetch(a, dst); };
  } else {
    m.payload = a.ucx_data ? std::span<const std::byte>(static_cast<const std::byte*>(a.ucx_data), a.length)
                           : std::span<const std::byte>(a.copy);
  }
  hand_over(m, on_message);
  // Not fetched: the engine refused it; releasing a rendezvous descriptor tells the sender.
  if (a.ucx_data && !a.fetched) {
    ucp_am_data_release(worker_, a.ucx_data);
    if (a.rendezvous) push_out(a.source);
  }
}

Status UcxTransport::poll(Clock::time_point deadline, const std::function<void(const InboundMessage&)>& on_message) {
  poll_deadline_ = deadline;
  (void)reap_flushes();
  // A completed send is news too: the engine waits for sends_in_flight() to drop (a staging
  // buffer to come free, a peer to be served) by calling poll() and looking again when it
  // returns. Returning only for messages deadlocked exact calls: a rank whose last sends of the
  // previous call completed inside this poll, after every peer had already sent it all it would
  // send before hearing from it, slept here until the watchdog (mpi.buckets.np3). So is a
  // completed flush: a call ends only once acknowledgements_pending() is zero.
  const std::uint64_t completed_at_entry = sends_completed_, delivered_at_entry = delivered_;
  OR_CHECK(!in_callback_, invalid, "UcxTransport::poll called while a message is being delivered");
  OR_CHECK(!abandoned_, peer, "a UCX rendezvous fetch was abandoned: this transport is given up");
  handler_ = &on_message;
  struct Reset {
    const std::function<void(const InboundMessage&)>*& handler;
    ~Reset() { handler = nullptr; }
  } reset{handler_};
  for (;;) {
    progress_all();
    if (!inbox_.empty()) {
      // Deliver outside UCX callbacks; the handler may send.
      while (!inbox_.empty()) {
        Arrived a = std::move(inbox_.front());
        inbox_.pop_front();
        deliver(a, on_message);
      }
      OR_CHECK(!failed_, peer, "a UCX endpoint failed");
      return {};
    }
    OR_CHECK(!failed_, peer, "a UCX endpoint failed");
    if (sends_completed_ != completed_at_entry || delivered_ != delivered_at_entry || reap_flushes()) return {};
    if (Clock::now() >= deadline) return Timeout("nothing arrived");
    wait_for_events(deadline);
  }
}

}  // namespace optireduce::ucx::detail

namespace optireduce::ucx {

using detail::UcxTransport;

std::unique_ptr<Transport> make_transport(const UcxSettings& settings, Status& status) {
  auto t = std::make_unique<UcxTransport>();
  status = t->start(settings);
  if (!status.ok()) return nullptr;
  return t;
}

}  // namespace optireduce::ucx
