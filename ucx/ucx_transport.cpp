#include "ucx_transport.hpp"

#include <poll.h>
#include <sched.h>
#include <ucp/api/ucp.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <regex>
#include <set>

#include "log.hpp"

namespace optireduce {
namespace {

constexpr unsigned kDataAmId = 0x4f52;   // engine messages
constexpr unsigned kHelloAmId = 0x4f53;  // connection handshake
constexpr const char* kEnvPrefix = "OPTIREDUCE";
// Spin on progress this long before blocking on the event fd: a message in flight usually lands
// within it, and blocking costs a system call and a wake-up.
constexpr auto kSpinBeforeBlock = std::chrono::microseconds(50);
// A rendezvous fetch is one transfer from a peer that is alive and in the call; this bounds it.
constexpr auto kFetchTimeout = std::chrono::seconds(10);
// Longest single block, so transports without wake-up events still get progressed.
constexpr int kMaxBlockMs = 5;

// UCX's TCP transport cuts every message into 8 KiB segments and reassembles them in a buffer of
// its own; with 4 ranks on 2 cores that costs 1.7x Open MPI's TCP at 16 MiB (bounded: deadlines
// expire for CPU, 1.5 % dropped on a clean loopback). One segment per chunk: 1.25x and 0.02 %.
// Set through the engine's own UCX config, so a job's own UCX is untouched: ucp_config_modify keeps
// keys it does not know and applies them, relative to each transport's table ("TX_SEG_SIZE", not
// "TCP_TX_SEG_SIZE"; only tcp has these two), to the interfaces it opens. A user's setting wins.
constexpr std::size_t kSegmentOverhead = 8u << 10;    // UCX's AM and TCP headers
constexpr std::size_t kLargestSegment = 1u << 20;     // above this UCX's receive buffers cost too much
void size_tcp_segments(ucp_config_t* config, std::size_t chunk_bytes) {
  const std::string bytes = std::to_string(std::min(chunk_bytes, kLargestSegment) + kSegmentOverhead);
  for (const char* key : {"TX_SEG_SIZE", "RX_SEG_SIZE"}) {
    const std::string plain = std::string("UCX_TCP_") + key, prefixed = std::string(kEnvPrefix) + "_" + plain;
    if (std::getenv(plain.c_str()) || std::getenv(prefixed.c_str())) continue;
    if (ucp_config_modify(config, key, bytes.c_str()) != UCS_OK) OR_LOG(debug, "UCX refused %s=%s", key, bytes.c_str());
  }
}

class UcxTransport final : public Transport {
 public:
  ~UcxTransport() override;

  bool start(const UcxOptions& options, std::string& error);
  std::vector<std::byte> local_address() const override { return address_; }
  TransportStatus connect(int self_rank, const std::vector<std::vector<std::byte>>& peers,
                          Clock::time_point deadline) override;
  TransportStatus send(int peer, std::span<const std::byte> header, std::span<const std::byte> payload) override;
  std::size_t sends_in_flight(int peer) const override { return in_flight_.at(peer); }
  TransportStatus poll(Clock::time_point deadline, const std::function<void(const InboundMessage&)>& on_message) override;
  std::size_t max_message_bytes() const override { return std::size_t{1} << 30; }
  bool reliable() const override { return true; }
  std::string describe() const override { return description_; }

 private:
  struct Arrived {
    std::vector<std::byte> header;
    void* ucx_data = nullptr;      // persistent UCX data or rendezvous descriptor
    bool rendezvous = false;       // payload still at the sender: fetch it into its destination
    bool fetched = false;
    std::vector<std::byte> copy;   // used when UCX could not keep the data for us
    std::size_t length = 0;
  };
  struct SendContext {
    UcxTransport* self;
    int peer;
  };

  static ucs_status_t on_data(void* arg, const void* header, std::size_t header_length, void* data,
                              std::size_t length, const ucp_am_recv_param_t* param);
  static ucs_status_t on_hello(void* arg, const void* header, std::size_t header_length, void* data,
                               std::size_t length, const ucp_am_recv_param_t* param);
  static void on_send_done(void* request, ucs_status_t status, void* user_data);
  static void on_peer_error(void* arg, ucp_ep_h ep, ucs_status_t status);

  TransportStatus post(int peer, unsigned am_id, std::span<const std::byte> header, std::span<const std::byte> payload);
  bool receive_payload(Arrived& a, std::span<std::byte> dst);
  void progress_all();
  void wait_for_events(Clock::time_point deadline);
  std::string chosen_transports() const;

  ucp_context_h context_ = nullptr;
  ucp_worker_h worker_ = nullptr;
  int event_fd_ = -1;
  std::vector<std::byte> address_;
  std::vector<ucp_ep_h> endpoints_;
  std::vector<std::size_t> in_flight_;
  std::vector<SendContext> send_contexts_;
  std::vector<std::uint8_t> hello_from_;
  std::deque<Arrived> inbox_;
  bool failed_ = false;
  std::int32_t hello_header_ = -1;  // read by UCX until the hello sends complete
  std::string description_ = "ucx (not connected)";
};

UcxTransport::~UcxTransport() {
  if (worker_) {
    // Flush what we sent, bounded, then close without a handshake that could wait on a dead peer.
    const auto deadline = Clock::now() + std::chrono::seconds(2);
    ucp_request_param_t param{};
    void* flush = ucp_worker_flush_nbx(worker_, &param);
    if (UCS_PTR_IS_PTR(flush)) {
      while (ucp_request_check_status(flush) == UCS_INPROGRESS && Clock::now() < deadline) ucp_worker_progress(worker_);
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
      while (ucp_request_check_status(req) == UCS_INPROGRESS && Clock::now() < deadline) ucp_worker_progress(worker_);
      ucp_request_free(req);
    }
    for (auto& a : inbox_)
      if (a.ucx_data) ucp_am_data_release(worker_, a.ucx_data);
    inbox_.clear();
    ucp_worker_destroy(worker_);
  }
  if (context_) ucp_cleanup(context_);
}

bool UcxTransport::start(const UcxOptions& options, std::string& error) {
  ucp_config_t* config = nullptr;
  ucs_status_t st = ucp_config_read(kEnvPrefix, nullptr, &config);
  if (st != UCS_OK) {
    error = std::string("ucp_config_read: ") + ucs_status_string(st);
    return false;
  }
  size_tcp_segments(config, options.chunk_bytes);
  ucp_params_t params{};
  params.field_mask = UCP_PARAM_FIELD_FEATURES | UCP_PARAM_FIELD_NAME;
  params.features = UCP_FEATURE_AM | UCP_FEATURE_WAKEUP;
  params.name = "optireduce";
  st = ucp_init(&params, config, &context_);
  ucp_config_release(config);
  if (st != UCS_OK) {
    error = std::string("ucp_init: ") + ucs_status_string(st);
    return false;
  }
  ucp_worker_params_t wparams{};
  wparams.field_mask = UCP_WORKER_PARAM_FIELD_THREAD_MODE | UCP_WORKER_PARAM_FIELD_EVENTS;
  wparams.thread_mode = UCS_THREAD_MODE_SINGLE;  // one engine call at a time drives this worker
  wparams.events = UCP_WAKEUP_RX | UCP_WAKEUP_TX;
  st = ucp_worker_create(context_, &wparams, &worker_);
  if (st != UCS_OK) {
    error = std::string("ucp_worker_create: ") + ucs_status_string(st);
    return false;
  }
  if (ucp_worker_get_efd(worker_, &event_fd_) != UCS_OK) event_fd_ = -1;

  for (auto [id, cb] : {std::pair{kDataAmId, &UcxTransport::on_data}, std::pair{kHelloAmId, &UcxTransport::on_hello}}) {
    ucp_am_handler_param_t h{};
    h.field_mask = UCP_AM_HANDLER_PARAM_FIELD_ID | UCP_AM_HANDLER_PARAM_FIELD_CB | UCP_AM_HANDLER_PARAM_FIELD_ARG |
                   UCP_AM_HANDLER_PARAM_FIELD_FLAGS;
    h.id = id;
    h.cb = cb;
    h.arg = this;
    h.flags = UCP_AM_FLAG_WHOLE_MSG | UCP_AM_FLAG_PERSISTENT_DATA;
    st = ucp_worker_set_am_recv_handler(worker_, &h);
    if (st != UCS_OK) {
      error = std::string("ucp_worker_set_am_recv_handler: ") + ucs_status_string(st);
      return false;
    }
  }
  ucp_address_t* address = nullptr;
  std::size_t length = 0;
  st = ucp_worker_get_address(worker_, &address, &length);
  if (st != UCS_OK) {
    error = std::string("ucp_worker_get_address: ") + ucs_status_string(st);
    return false;
  }
  const auto* bytes = reinterpret_cast<const std::byte*>(address);
  address_.assign(bytes, bytes + length);
  ucp_worker_release_address(worker_, address);
  return true;
}

ucs_status_t UcxTransport::on_data(void* arg, const void* header, std::size_t header_length, void* data,
                                   std::size_t length, const ucp_am_recv_param_t* param) {
  auto* self = static_cast<UcxTransport*>(arg);
  Arrived a;
  const auto* h = static_cast<const std::byte*>(header);
  a.header.assign(h, h + header_length);
  a.length = length;
  // Keep UCX's descriptor instead of copying; deliver outside this callback (never progress UCX
  // or send from inside its own callbacks). A rendezvous payload is fetched only once the engine
  // has validated the header and named the destination.
  if (param->recv_attr & (UCP_AM_RECV_ATTR_FLAG_DATA | UCP_AM_RECV_ATTR_FLAG_RNDV)) {
    a.rendezvous = param->recv_attr & UCP_AM_RECV_ATTR_FLAG_RNDV;
    a.ucx_data = data;
    self->inbox_.push_back(std::move(a));
    return UCS_INPROGRESS;
  }
  const auto* d = static_cast<const std::byte*>(data);
  a.copy.assign(d, d + length);
  self->inbox_.push_back(std::move(a));
  return UCS_OK;
}

ucs_status_t UcxTransport::on_hello(void* arg, const void* header, std::size_t header_length, void*, std::size_t,
                                    const ucp_am_recv_param_t*) {
  auto* self = static_cast<UcxTransport*>(arg);
  std::int32_t from = -1;
  if (header_length == sizeof from) std::memcpy(&from, header, sizeof from);
  if (from >= 0 && static_cast<std::size_t>(from) < self->hello_from_.size()) self->hello_from_[from] = 1;
  return UCS_OK;
}

void UcxTransport::on_send_done(void* request, ucs_status_t status, void* user_data) {
  ucp_request_free(request);  // freeing earlier would suppress this callback
  auto* ctx = static_cast<SendContext*>(user_data);
  if (status != UCS_OK) ctx->self->failed_ = true;
  --ctx->self->in_flight_[ctx->peer];
}

void UcxTransport::on_peer_error(void* arg, ucp_ep_h, ucs_status_t status) {
  auto* ctx = static_cast<SendContext*>(arg);
  OR_LOG(debug, "UCX reports peer %d failed: %s", ctx->peer, ucs_status_string(status));
  ctx->self->failed_ = true;
}

TransportStatus UcxTransport::connect(int self_rank, const std::vector<std::vector<std::byte>>& peers,
                                      Clock::time_point deadline) {
  const std::size_t n = peers.size();
  endpoints_.assign(n, nullptr);
  in_flight_.assign(n, 0);
  hello_from_.assign(n, 0);
  send_contexts_.resize(n);
  for (std::size_t p = 0; p < n; ++p) send_contexts_[p] = {this, static_cast<int>(p)};
  for (std::size_t p = 0; p < n; ++p) {
    if (static_cast<int>(p) == self_rank) continue;
    ucp_ep_params_t ep{};
    ep.field_mask = UCP_EP_PARAM_FIELD_REMOTE_ADDRESS | UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE |
                    UCP_EP_PARAM_FIELD_ERR_HANDLER;
    ep.address = reinterpret_cast<const ucp_address_t*>(peers[p].data());
    ep.err_mode = UCP_ERR_HANDLING_MODE_NONE;
    ep.err_handler.cb = &UcxTransport::on_peer_error;
    ep.err_handler.arg = &send_contexts_[p];
    ucs_status_t st = ucp_ep_create(worker_, &ep, &endpoints_[p]);
    if (st != UCS_OK) {
      OR_LOG(warn, "ucp_ep_create to rank %zu: %s", p, ucs_status_string(st));
      return TransportStatus::error;
    }
  }
  // Handshake: a hello to every peer and one from every peer proves both directions work.
  hello_header_ = self_rank;
  for (std::size_t p = 0; p < n; ++p) {
    if (static_cast<int>(p) == self_rank) continue;
    if (post(static_cast<int>(p), kHelloAmId, {reinterpret_cast<const std::byte*>(&hello_header_), sizeof hello_header_}, {}) !=
        TransportStatus::ok)
      return TransportStatus::error;
  }
  for (;;) {
    progress_all();
    bool done = !failed_;
    for (std::size_t p = 0; p < n; ++p)
      if (static_cast<int>(p) != self_rank && (!hello_from_[p] || in_flight_[p])) done = false;
    if (done) break;
    if (failed_ || Clock::now() >= deadline) {
      std::string missing;
      for (std::size_t p = 0; p < n; ++p)
        if (static_cast<int>(p) != self_rank && (!hello_from_[p] || in_flight_[p]))
          missing += " " + std::to_string(p) + (hello_from_[p] ? "(send pending)" : "(no hello)");
      OR_LOG(warn, "UCX connection handshake incomplete%s; peers:%s", failed_ ? " (peer failure)" : "", missing.c_str());
      return TransportStatus::error;
    }
    wait_for_events(deadline);
  }
  // Data of a peer that finished its handshake first may already be in the inbox: it stays there
  // for the first call.
  description_ = chosen_transports();
  OR_LOG(info, "UCX transports in use: %s", description_.c_str());
  return TransportStatus::ok;
}

TransportStatus UcxTransport::send(int peer, std::span<const std::byte> header, std::span<const std::byte> payload) {
  return post(peer, kDataAmId, header, payload);
}

TransportStatus UcxTransport::post(int peer, unsigned am_id, std::span<const std::byte> header,
                                   std::span<const std::byte> payload) {
  if (failed_) return TransportStatus::error;
  ucp_request_param_t param{};
  param.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA | UCP_OP_ATTR_FIELD_FLAGS;
  param.cb.send = &UcxTransport::on_send_done;
  param.user_data = &send_contexts_[peer];
  // Eager: the sender pushes, no per-message handshake that needs both sides scheduled (4 ranks
  // on 2 cores make every round trip expensive).
  param.flags = UCP_AM_SEND_FLAG_EAGER;
  void* req = ucp_am_send_nbx(endpoints_[peer], am_id, header.data(), header.size(), payload.data(), payload.size(), &param);
  if (req == nullptr) return TransportStatus::ok;
  if (UCS_PTR_IS_ERR(req)) {
    OR_LOG(warn, "ucp_am_send_nbx to rank %d: %s", peer, ucs_status_string(UCS_PTR_STATUS(req)));
    failed_ = true;
    return TransportStatus::error;
  }
  ++in_flight_[peer];  // on_send_done counts it down and frees the request
  return TransportStatus::ok;
}

void UcxTransport::progress_all() {
  while (ucp_worker_progress(worker_) != 0) {
  }
}

void UcxTransport::wait_for_events(Clock::time_point deadline) {
  const auto spin_until = std::min(deadline, Clock::now() + kSpinBeforeBlock);
  while (Clock::now() < spin_until) {
    if (ucp_worker_progress(worker_) != 0) return;
    sched_yield();
  }
  if (event_fd_ < 0) return;
  if (ucp_worker_arm(worker_) == UCS_ERR_BUSY) return;  // events pending: progress again
  const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
  struct pollfd pfd{event_fd_, POLLIN, 0};
  ::poll(&pfd, 1, static_cast<int>(std::clamp<long long>(left + 1, 0, kMaxBlockMs)));
}

TransportStatus UcxTransport::poll(Clock::time_point deadline,
                                   const std::function<void(const InboundMessage&)>& on_message) {
  for (;;) {
    progress_all();
    if (!inbox_.empty()) {
      // Deliver outside UCX callbacks; the handler may send.
      while (!inbox_.empty()) {
        Arrived a = std::move(inbox_.front());
        inbox_.pop_front();
        InboundMessage m;
        m.header = a.header;
        m.payload_size = a.length;
        m.receive_into = [this, &a](std::span<std::byte> dst) { return receive_payload(a, dst); };
        on_message(m);
        // Not fetched: the engine refused it; releasing a rendezvous descriptor tells the sender.
        if (a.ucx_data && !a.fetched) ucp_am_data_release(worker_, a.ucx_data);
      }
      return failed_ ? TransportStatus::error : TransportStatus::ok;
    }
    if (failed_) return TransportStatus::error;
    if (Clock::now() >= deadline) return TransportStatus::timeout;
    wait_for_events(deadline);
  }
}

bool UcxTransport::receive_payload(Arrived& a, std::span<std::byte> dst) {
  if (dst.size() != a.length || a.fetched) return false;
  if (!a.rendezvous) {
    if (a.length) std::memcpy(dst.data(), a.ucx_data ? a.ucx_data : a.copy.data(), a.length);
    return true;
  }
  a.fetched = true;  // from here on UCX owns the descriptor
  struct Fetch {
    bool done = false;
    ucs_status_t status = UCS_OK;
  } fetch;
  ucp_request_param_t param{};
  param.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA;
  param.cb.recv_am = [](void*, ucs_status_t status, std::size_t, void* user) {
    auto* f = static_cast<Fetch*>(user);
    f->status = status;
    f->done = true;
  };
  param.user_data = &fetch;
  void* req = ucp_am_recv_data_nbx(worker_, a.ucx_data, dst.data(), dst.size(), &param);
  if (req == nullptr) return true;
  if (UCS_PTR_IS_ERR(req)) return false;
  // The destination may be the caller's buffer, so the fetch completes (or is cancelled and
  // finished) before this returns: nothing may write there after the engine call is over.
  const auto give_up = Clock::now() + kFetchTimeout;
  while (!fetch.done && Clock::now() < give_up) ucp_worker_progress(worker_);
  if (!fetch.done) {
    ucp_request_cancel(worker_, req);
    while (!fetch.done) ucp_worker_progress(worker_);
    OR_LOG(warn, "a rendezvous fetch of %zu bytes did not complete in %lld ms", dst.size(),
           static_cast<long long>(std::chrono::duration_cast<std::chrono::milliseconds>(kFetchTimeout).count()));
  }
  ucp_request_free(req);
  return fetch.status == UCS_OK;
}

std::string UcxTransport::chosen_transports() const {
  // ucp_ep_print_info lists the lanes of an endpoint; keep the distinct "transport/device" names.
  std::set<std::string> names;
  static const std::regex lane(R"(lane\[\d+\]:\s+\d+:([a-z][a-z0-9_]*/[A-Za-z0-9_.:\-]+))");
  for (ucp_ep_h ep : endpoints_) {
    if (!ep) continue;
    char* text = nullptr;
    std::size_t size = 0;
    FILE* stream = open_memstream(&text, &size);
    if (!stream) continue;
    ucp_ep_print_info(ep, stream);
    std::fclose(stream);
    std::string info(text, size);
    std::free(text);
    OR_LOG(debug, "endpoint configuration:\n%s", info.c_str());
    for (std::sregex_iterator it(info.begin(), info.end(), lane), end; it != end; ++it) names.insert((*it)[1]);
  }
  std::string out;
  for (const auto& n : names) out += (out.empty() ? "" : ",") + n;
  return out.empty() ? "ucx" : out;
}

}  // namespace

std::unique_ptr<Transport> make_ucx_transport(const UcxOptions& options, std::string& error) {
  auto t = std::make_unique<UcxTransport>();
  if (!t->start(options, error)) return nullptr;
  return t;
}

std::vector<std::string> ucx_available_transports() {
  std::vector<std::string> out;
  ucp_config_t* config = nullptr;
  if (ucp_config_read(kEnvPrefix, nullptr, &config) != UCS_OK) return out;
  ucp_context_h context = nullptr;
  ucp_params_t params{};
  params.field_mask = UCP_PARAM_FIELD_FEATURES;
  params.features = UCP_FEATURE_AM | UCP_FEATURE_WAKEUP;
  const bool ok = ucp_init(&params, config, &context) == UCS_OK;
  ucp_config_release(config);
  if (!ok) return out;
  char* text = nullptr;
  std::size_t size = 0;
  if (FILE* stream = open_memstream(&text, &size)) {
    ucp_context_print_info(context, stream);
    std::fclose(stream);
    std::string info(text, size);
    std::free(text);
    // Lines look like "#      resource 3  :  md 1  dev 1  flags -- tcp/lo".
    static const std::regex res(R"(resource\s+\d+\s*:.*\s([a-z][a-z0-9_]*/[A-Za-z0-9_.:\-]+))");
    for (std::sregex_iterator it(info.begin(), info.end(), res), end; it != end; ++it) out.push_back((*it)[1]);
  }
  ucp_cleanup(context);
  return out;
}

}  // namespace optireduce
