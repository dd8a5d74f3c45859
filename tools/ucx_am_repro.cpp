// ucx-am-repro: the engine's UCX message pattern with nothing but UCP, for finding what UCX does
// with it (no MPI, no engine). N processes (fork), one UCP worker each, exchange active messages
// the way src/tar_call.cpp drives ucx/ucx_transport.cpp: a Transpose AllReduce of an in-place
// float buffer per call, buffers of several distinct sizes back to back.
//
//   scatter:  every rank sends chunk c of shard p to rank p, peers interleaved (r+1, r+2, ...),
//             a non-blocking progress after each round; all sends outstanding at once
//   receive:  the AM callback keeps UCX's descriptor (UCP_AM_FLAG_PERSISTENT_DATA, returns
//             UCS_INPROGRESS) and queues it; the poll loop later fetches rendezvous payloads with
//             ucp_am_recv_data_nbx straight into their destination, progressing until done
//   reduce:   a chunk with every contribution is summed and sent to every peer (all-gather)
//   finish:   a zero-length "done" to every peer, then wait until each peer said done or every
//             send to it completed; data of the next call that arrives early is fetched and kept
//
// Every result is checked. A call that makes no progress for --stall-ms prints what every rank
// holds (missing chunks, queued descriptors, sends in flight, fetches that did not complete) and
// the run exits 2.
//
// Build (no CMake target; it needs only UCX):
//   g++ -std=c++20 -O2 -o build/ucx-am-repro tools/ucx_am_repro.cpp $(pkg-config --cflags --libs ucx)
// Run: build/ucx-am-repro --help
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <ucp/api/ucp.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <string>
#include <vector>

namespace {

using Clock = std::chrono::steady_clock;

struct Options {
  int ranks = 3;
  int steps = 15;
  std::vector<std::size_t> counts;   // floats per buffer, reduced in this order each step
  std::size_t chunk_floats = 65536;  // 256 KiB
  bool eager_flag = true;            // UCP_AM_SEND_FLAG_EAGER on every send
  bool rndv_flag = false;            // UCP_AM_SEND_FLAG_RNDV instead
  bool reply_flag = true;            // UCP_AM_SEND_FLAG_REPLY
  bool mt_shared = true;             // context mt_workers_shared
  bool wakeup = true;                // block on the event fd (arm + poll) or spin
  bool persistent = true;            // UCP_AM_FLAG_PERSISTENT_DATA
  bool release_eager_late = true;    // keep eager descriptors until delivered (as the transport)
  int fetch_timeout_ms = 10000;      // as the transport's kFetchTimeout
  int stall_ms = 15000;
  int max_block_ms = 5;
  const char* rndv_thresh = nullptr; // UCX_RNDV_THRESH for the context (nullptr: UCX's own)
  const char* rndv_scheme = nullptr;
  const char* tls = nullptr;
  bool verbose = false;
  // Wait as the engine waits on ucx/ucx_transport.cpp: a condition is looked at again only when
  // poll() returns, and poll() returns only once a message was delivered (or its deadline
  // passed); each call first waits for the previous call's sends (the engine's staging buffer).
  bool engine_waits = false;
  // With engine_waits: poll() also returns when a send completed (the fix).
  bool return_on_completion = false;
  int gap_us = 0;  // the application's own work between calls (no UCX progress), per call
  int handle_us = 0;  // time spent per delivered data message without progress (a rank descheduled)
  bool barrier = false;  // a barrier between calls that does not progress UCX (the job's PMPI_Barrier)
  // After a rendezvous fetch, flush the endpoint to its sender before going on: the fetch's
  // acknowledgement (ATS), which completes the sender's send, is then out of this worker.
  bool flush_after_fetch = false;
};

// Shared between the processes (mmap before fork): addresses and a barrier.
struct Shared {
  pthread_barrier_t barrier;
  std::atomic<int> failed;
  std::atomic<int> finished;
  std::atomic<long> arrived[16];  // per rank: calls through the inter-call barrier
  std::size_t address_len[16];
  unsigned char address[16][4096];
  // Each rank's view, published when a call stalls.
  std::atomic<long> epoch[16];
  std::atomic<int> phase[16];
};

struct Header {
  std::uint64_t epoch;
  std::uint32_t kind;  // 0 scatter, 1 gather, 2 done
  std::uint32_t source;
  std::uint64_t offset;  // floats, in the whole buffer
  std::uint32_t length;  // floats
  std::uint32_t chunk;
};

struct Arrived {
  Header h{};
  void* data = nullptr;
  std::size_t length = 0;
  bool rndv = false;
  std::vector<unsigned char> copy;  // UCX did not give a descriptor
};

struct Early {
  Header h;
  std::vector<float> payload;
};

std::size_t shard_begin(std::size_t count, int ranks, int p) { return count * static_cast<std::size_t>(p) / ranks; }
std::size_t shard_size(std::size_t count, int ranks, int p) { return shard_begin(count, ranks, p + 1) - shard_begin(count, ranks, p); }
std::size_t chunks_in(std::size_t count, int ranks, int p, std::size_t chunk) { return (shard_size(count, ranks, p) + chunk - 1) / chunk; }

float value(int rank, long epoch, std::size_t i) { return static_cast<float>((rank + 1) * 3 + (epoch % 7) + static_cast<long>(i % 1000)); }

class Rank {
 public:
  Rank(const Options& o, Shared& sh, int rank) : o_(o), sh_(sh), rank_(rank) {}

  int run() {
    if (!start()) return 3;
    pthread_barrier_wait(&sh_.barrier);
    if (!connect()) return 3;
    pthread_barrier_wait(&sh_.barrier);
    long epoch = 0;
    std::vector<std::vector<float>> buffers(o_.counts.size());
    for (int step = 0; step < o_.steps; ++step)
      for (std::size_t b = 0; b < o_.counts.size(); ++b) {
        ++epoch;
        if (o_.barrier && !between_calls_barrier(epoch)) return 2;
        if (o_.gap_us) {
          const auto until = Clock::now() + std::chrono::microseconds(o_.gap_us);
          while (Clock::now() < until) {
          }
        }
        auto& buf = buffers[b];
        buf.assign(o_.counts[b], 0.f);
        for (std::size_t i = 0; i < buf.size(); ++i) buf[i] = value(rank_, epoch, i);
        if (!call(epoch, buf)) {
          sh_.failed = 1;
          return 2;
        }
        for (std::size_t i = 0; i < buf.size(); ++i) {
          float want = 0;
          for (int r = 0; r < o_.ranks; ++r) want += value(r, epoch, i);
          if (buf[i] != want) {
            std::fprintf(stderr, "rank %d call %ld: entry %zu is %g, want %g\n", rank_, epoch, i, buf[i], want);
            sh_.failed = 1;
            return 1;
          }
        }
      }
    // Keep progressing until every rank is through: peers may still need us for their last sends.
    ++sh_.finished;
    const auto until = Clock::now() + std::chrono::seconds(30);
    while (sh_.finished < o_.ranks && !sh_.failed && Clock::now() < until) {
      progress();
      for (auto& a : inbox_)
        if (a.data) ucp_am_data_release(worker_, a.data);
      inbox_.clear();
      wait_events(Clock::now() + std::chrono::milliseconds(1));
    }
    if (rank_ == 0)
      std::printf("ok: %ld calls, %d ranks; received %llu eager, %llu rendezvous; %llu fetches, %llu early; "
                  "%llu polls returned for a completed send alone; %llu sends did not complete at once; "
                  "%llu flushes waited\n",
                  epoch, o_.ranks, static_cast<unsigned long long>(eager_in_), static_cast<unsigned long long>(rndv_in_),
                  static_cast<unsigned long long>(fetches_), static_cast<unsigned long long>(early_kept_), completion_returns_, sends_posted_, flush_waits_);
    close();
    return 0;
  }

 private:
  bool start() {
    ucp_config_t* config = nullptr;
    if (ucp_config_read(nullptr, nullptr, &config) != UCS_OK) return false;
    if (o_.rndv_thresh) ucp_config_modify(config, "RNDV_THRESH", o_.rndv_thresh);
    if (o_.rndv_scheme) ucp_config_modify(config, "RNDV_SCHEME", o_.rndv_scheme);
    if (o_.tls) ucp_config_modify(config, "TLS", o_.tls);
    ucp_params_t params{};
    params.field_mask = UCP_PARAM_FIELD_FEATURES | UCP_PARAM_FIELD_MT_WORKERS_SHARED;
    params.features = UCP_FEATURE_AM | (o_.wakeup ? UCP_FEATURE_WAKEUP : 0);
    params.mt_workers_shared = o_.mt_shared ? 1 : 0;
    ucs_status_t st = ucp_init(&params, config, &context_);
    ucp_config_release(config);
    if (st != UCS_OK) return fail("ucp_init", st);
    ucp_worker_params_t w{};
    w.field_mask = UCP_WORKER_PARAM_FIELD_THREAD_MODE | (o_.wakeup ? UCP_WORKER_PARAM_FIELD_EVENTS : 0);
    w.thread_mode = UCS_THREAD_MODE_SINGLE;
    w.events = UCP_WAKEUP_RX | UCP_WAKEUP_TX;
    if ((st = ucp_worker_create(context_, &w, &worker_)) != UCS_OK) return fail("ucp_worker_create", st);
    if (o_.wakeup && ucp_worker_get_efd(worker_, &efd_) != UCS_OK) efd_ = -1;
    ucp_am_handler_param_t h{};
    h.field_mask = UCP_AM_HANDLER_PARAM_FIELD_ID | UCP_AM_HANDLER_PARAM_FIELD_CB | UCP_AM_HANDLER_PARAM_FIELD_ARG |
                   UCP_AM_HANDLER_PARAM_FIELD_FLAGS;
    h.id = 7;
    h.cb = &Rank::on_am;
    h.arg = this;
    h.flags = UCP_AM_FLAG_WHOLE_MSG | (o_.persistent ? UCP_AM_FLAG_PERSISTENT_DATA : 0);
    if ((st = ucp_worker_set_am_recv_handler(worker_, &h)) != UCS_OK) return fail("set_am_recv_handler", st);
    ucp_address_t* addr = nullptr;
    std::size_t len = 0;
    if ((st = ucp_worker_get_address(worker_, &addr, &len)) != UCS_OK) return fail("get_address", st);
    if (len > sizeof sh_.address[0]) return fail("address too long", UCS_ERR_EXCEEDS_LIMIT);
    std::memcpy(sh_.address[rank_], addr, len);
    sh_.address_len[rank_] = len;
    ucp_worker_release_address(worker_, addr);
    return true;
  }

  bool connect() {
    eps_.assign(o_.ranks, nullptr);
    in_flight_.assign(o_.ranks, 0);
    ctx_.resize(o_.ranks);
    for (int p = 0; p < o_.ranks; ++p) {
      ctx_[p] = {this, p};
      if (p == rank_) continue;
      ucp_ep_params_t ep{};
      ep.field_mask = UCP_EP_PARAM_FIELD_REMOTE_ADDRESS;
      ep.address = reinterpret_cast<const ucp_address_t*>(sh_.address[p]);
      ucs_status_t st = ucp_ep_create(worker_, &ep, &eps_[p]);
      if (st != UCS_OK) return fail("ucp_ep_create", st);
    }
    // A zero-length hello each way resolves the remote endpoint ids (reply protocol).
    Header hello{};
    hello.kind = 3;
    hello.source = rank_;
    for (int p = 0; p < o_.ranks; ++p)
      if (p != rank_) post(p, hello, nullptr, 0);
    const auto until = Clock::now() + std::chrono::seconds(30);
    while (Clock::now() < until) {
      progress();
      take_inbox_hellos();
      bool all = hellos_ == o_.ranks - 1;
      for (int p = 0; p < o_.ranks; ++p) all = all && in_flight_[p] == 0;
      if (all) break;
      wait_events(Clock::now() + std::chrono::milliseconds(5));
    }
    if (rank_ == 0 && o_.verbose) print_lanes();
    return hellos_ == o_.ranks - 1;
  }

  void take_inbox_hellos() {
    for (auto it = inbox_.begin(); it != inbox_.end();) {
      if (it->h.kind == 3) {
        ++hellos_;
        if (it->data) ucp_am_data_release(worker_, it->data);
        it = inbox_.erase(it);
      } else {
        ++it;
      }
    }
  }

  void print_lanes() {
    for (int p = 0; p < o_.ranks; ++p)
      if (eps_[p]) {
        ucp_ep_print_info(eps_[p], stdout);
        break;
      }
  }

  static ucs_status_t on_am(void* arg, const void* header, std::size_t header_length, void* data, std::size_t length,
                            const ucp_am_recv_param_t* param) {
    auto* self = static_cast<Rank*>(arg);
    Arrived a;
    if (header_length != sizeof(Header)) {
      std::fprintf(stderr, "rank %d: header of %zu bytes\n", self->rank_, header_length);
      return UCS_OK;
    }
    std::memcpy(&a.h, header, sizeof(Header));
    a.length = length;
    if (param->recv_attr & UCP_AM_RECV_ATTR_FLAG_RNDV) {
      ++self->rndv_in_;
      a.rndv = true;
      a.data = data;
      self->inbox_.push_back(std::move(a));
      return UCS_INPROGRESS;
    }
    if (length) ++self->eager_in_;
    if ((param->recv_attr & UCP_AM_RECV_ATTR_FLAG_DATA) && self->o_.release_eager_late) {
      a.data = data;
      self->inbox_.push_back(std::move(a));
      return UCS_INPROGRESS;
    }
    const auto* d = static_cast<const unsigned char*>(data);
    a.copy.assign(d, d + length);
    self->inbox_.push_back(std::move(a));
    return UCS_OK;
  }

  struct SendCtx {
    Rank* self;
    int peer;
  };

  static void on_sent(void* request, ucs_status_t status, void* user) {
    ucp_request_free(request);
    auto* c = static_cast<SendCtx*>(user);
    if (status != UCS_OK) std::fprintf(stderr, "rank %d: send to %d: %s\n", c->self->rank_, c->peer, ucs_status_string(status));
    --c->self->in_flight_[c->peer];
    ++c->self->completions_;
  }

  void post(int peer, const Header& h, const float* payload, std::size_t floats) {
    // The header must live until the send completes: keep every header of the call.
    headers_.push_back(h);
    ucp_request_param_t param{};
    param.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA | UCP_OP_ATTR_FIELD_FLAGS;
    param.cb.send = &Rank::on_sent;
    param.user_data = &ctx_[peer];
    param.flags = (o_.eager_flag ? UCP_AM_SEND_FLAG_EAGER : 0) | (o_.rndv_flag ? UCP_AM_SEND_FLAG_RNDV : 0) |
                  (o_.reply_flag ? UCP_AM_SEND_FLAG_REPLY : 0);
    void* req = ucp_am_send_nbx(eps_[peer], 7, &headers_.back(), sizeof(Header), payload, floats * sizeof(float), &param);
    if (req == nullptr) return;
    if (UCS_PTR_IS_ERR(req)) {
      std::fprintf(stderr, "rank %d: ucp_am_send_nbx: %s\n", rank_, ucs_status_string(UCS_PTR_STATUS(req)));
      sh_.failed = 1;
      return;
    }
    ++in_flight_[peer];
    ++sends_posted_;
  }

  void progress() {
    while (ucp_worker_progress(worker_) != 0) {
    }
  }

  void wait_events(Clock::time_point deadline) {
    const auto spin_until = std::min(deadline, Clock::now() + std::chrono::microseconds(50));
    while (Clock::now() < spin_until) {
      if (ucp_worker_progress(worker_) != 0) return;
      sched_yield();
    }
    if (efd_ < 0) return;
    if (ucp_worker_arm(worker_) == UCS_ERR_BUSY) return;
    struct pollfd pfd{efd_, POLLIN, 0};
    ::poll(&pfd, 1, o_.max_block_ms);
  }

  // UcxTransport::poll: progress, deliver what arrived and return true; false at the deadline.
  template <typename Deliver>
  bool transport_poll(Clock::time_point deadline, Deliver&& deliver) {
    const auto completions_at_entry = completions_;
    for (;;) {
      progress();
      if (!inbox_.empty()) {
        deliver();
        return true;
      }
      if (o_.return_on_completion && completions_ != completions_at_entry) {
        ++completion_returns_;
        return true;
      }
      if (sh_.failed || Clock::now() >= deadline) return false;
      wait_events(deadline);
    }
  }

  // Fetches a rendezvous payload (or copies an eager one) into dst; the transport's fetch().
  bool take(Arrived& a, void* dst) {
    if (!a.rndv) {
      if (a.data) {
        std::memcpy(dst, a.data, a.length);
        ucp_am_data_release(worker_, a.data);
        a.data = nullptr;
      } else {
        std::memcpy(dst, a.copy.data(), a.length);
      }
      return true;
    }
    struct Done {
      bool done = false;
      ucs_status_t status = UCS_OK;
    } done;
    ucp_request_param_t param{};
    param.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA;
    param.cb.recv_am = [](void*, ucs_status_t status, std::size_t, void* user) {
      auto* d = static_cast<Done*>(user);
      d->status = status;
      d->done = true;
    };
    param.user_data = &done;
    ++fetches_;
    void* req = ucp_am_recv_data_nbx(worker_, a.data, dst, a.length, &param);
    a.data = nullptr;
    if (req == nullptr) return true;
    if (UCS_PTR_IS_ERR(req)) {
      std::fprintf(stderr, "rank %d: ucp_am_recv_data_nbx: %s\n", rank_, ucs_status_string(UCS_PTR_STATUS(req)));
      return false;
    }
    const auto give_up = Clock::now() + std::chrono::milliseconds(o_.fetch_timeout_ms);
    while (!done.done && Clock::now() < give_up) ucp_worker_progress(worker_);
    if (!done.done) {
      ++fetch_timeouts_;
      std::fprintf(stderr, "rank %d: a rendezvous fetch of %zu bytes did not complete in %d ms (epoch %llu kind %u from %u)\n",
                   rank_, a.length, o_.fetch_timeout_ms, static_cast<unsigned long long>(a.h.epoch), a.h.kind, a.h.source);
      ucp_request_cancel(worker_, req);
      while (!done.done) ucp_worker_progress(worker_);
    }
    ucp_request_free(req);
    if (o_.flush_after_fetch) flush_to(a.h.source);
    return done.status == UCS_OK;
  }

  // Pushes out what this worker queued for `peer` (a fetch's ATS among it), progressing.
  void flush_to(int peer) {
    ucp_request_param_t param{};
    void* req = ucp_ep_flush_nbx(eps_[peer], &param);
    if (!UCS_PTR_IS_PTR(req)) return;
    ++flush_waits_;
    const auto give_up = Clock::now() + std::chrono::milliseconds(o_.fetch_timeout_ms);
    while (ucp_request_check_status(req) == UCS_INPROGRESS && Clock::now() < give_up) ucp_worker_progress(worker_);
    ucp_request_free(req);
  }

  bool call(long epoch, std::vector<float>& buf) {
    const std::size_t count = buf.size();
    const int n = o_.ranks;
    epoch_ = epoch;
    sh_.epoch[rank_] = epoch;
    sh_.phase[rank_] = 0;
    if (o_.engine_waits && !wait_for_previous_sends(epoch)) return false;
    if (std::all_of(in_flight_.begin(), in_flight_.end(), [](std::size_t f) { return f == 0; })) headers_.clear();
    const std::size_t own_begin = shard_begin(count, n, rank_), own_size = shard_size(count, n, rank_);
    const std::size_t own_chunks = chunks_in(count, n, rank_, o_.chunk_floats);
    slots_.assign(own_size * (n - 1), 0.f);
    contributors_.assign(own_chunks, 0);
    seen_.assign(static_cast<std::size_t>(n) * std::max<std::size_t>(own_chunks, 1), 0);
    std::vector<std::size_t> gather_left(n, 0);
    std::size_t gather_remaining = 0;
    for (int p = 0; p < n; ++p)
      if (p != rank_) gather_remaining += gather_left[p] = chunks_in(count, n, p, o_.chunk_floats);
    gseen_.assign(static_cast<std::size_t>(n) * 64, 0);
    done_from_.assign(n, 0);
    std::size_t reduced = 0;
    std::vector<float> own(buf.begin() + own_begin, buf.begin() + own_begin + own_size);  // staged own shard

    auto chunk_extent = [&](int p, std::size_t c) {
      const std::size_t b = shard_begin(count, n, p) + c * o_.chunk_floats;
      const std::size_t e = std::min(b + o_.chunk_floats, shard_begin(count, n, p) + shard_size(count, n, p));
      return std::pair{b, e - b};
    };
    auto reduce = [&](std::size_t c) {
      auto [off, len] = chunk_extent(rank_, c);
      const std::size_t rel = off - own_begin;
      for (int s = 0; s < n - 1; ++s)
        for (std::size_t i = 0; i < len; ++i) own[rel + i] += slots_[s * own_size + rel + i];
      std::memcpy(buf.data() + off, own.data() + rel, len * sizeof(float));
      ++reduced;
      for (int k = 1; k < n; ++k) {
        const int peer = (rank_ + k) % n;
        Header h{static_cast<std::uint64_t>(epoch), 1, static_cast<std::uint32_t>(rank_), off, static_cast<std::uint32_t>(len),
                 static_cast<std::uint32_t>(c)};
        post(peer, h, own.data() + rel, len);
      }
    };
    std::vector<std::size_t> ready;
    auto handle = [&](Arrived& a) -> bool {
      const Header& h = a.h;
      if (h.kind == 3) {
        if (a.data) ucp_am_data_release(worker_, a.data);
        return true;
      }
      if (static_cast<long>(h.epoch) > epoch) {
        Early e{h, std::vector<float>(h.length)};
        if (h.length && !take(a, e.payload.data())) return false;
        if (!h.length && a.data) ucp_am_data_release(worker_, a.data);
        early_.push_back(std::move(e));
        ++early_kept_;
        return true;
      }
      if (static_cast<long>(h.epoch) < epoch) {
        if (h.kind != 2) std::fprintf(stderr, "rank %d: stale message (kind %u) of call %llu in call %ld\n", rank_, h.kind, static_cast<unsigned long long>(h.epoch), epoch);
        if (a.data) ucp_am_data_release(worker_, a.data);
        return true;
      }
      if (h.kind == 2) {
        done_from_[h.source] = 1;
        if (a.data) ucp_am_data_release(worker_, a.data);
        return true;
      }
      if (h.kind == 0) {
        const int slot = static_cast<int>(h.source) < rank_ ? h.source : h.source - 1;
        float* dst = slots_.data() + slot * own_size + (h.offset - own_begin);
        if (!take(a, dst)) return false;
        seen_[h.source * own_chunks + h.chunk] = 1;
        if (++contributors_[h.chunk] == static_cast<std::uint32_t>(n - 1)) ready.push_back(h.chunk);
        return true;
      }
      if (h.kind == 1) {
        if (!take(a, buf.data() + h.offset)) return false;
        if (h.source * 64 + h.chunk < gseen_.size()) gseen_[h.source * 64 + h.chunk] = 1;
        --gather_left[h.source];
        --gather_remaining;
        return true;
      }
      return true;
    };
    auto drain = [&]() -> bool {
      progress();
      bool any = false;
      while (!inbox_.empty()) {
        Arrived a = std::move(inbox_.front());
        inbox_.pop_front();
        any = true;
        if (o_.handle_us && a.length) usleep(o_.handle_us);
        if (!handle(a)) {
          std::fprintf(stderr, "rank %d: call %ld: a message of kind %u from %u could not be taken\n", rank_, epoch, a.h.kind, a.h.source);
          unreadable_++;
        }
      }
      return any;
    };
    // Early data of this call, kept from the previous one.
    {
      std::vector<Early> pending;
      pending.swap(early_);
      for (auto& e : pending) {
        if (static_cast<long>(e.h.epoch) != epoch) {
          early_.push_back(std::move(e));
          continue;
        }
        Arrived a;
        a.h = e.h;
        a.length = e.payload.size() * sizeof(float);
        a.copy.resize(a.length);
        std::memcpy(a.copy.data(), e.payload.data(), a.length);
        handle(a);
      }
    }
    // Scatter: chunk by chunk, peers interleaved; the sends read the caller's buffer (exact mode).
    std::size_t max_chunks = 0;
    for (int p = 0; p < n; ++p) max_chunks = std::max(max_chunks, chunks_in(count, n, p, o_.chunk_floats));
    std::size_t sent = 0;
    for (std::size_t c = 0; c < max_chunks; ++c)
      for (int k = 1; k < n; ++k) {
        const int peer = (rank_ + k) % n;
        if (c >= chunks_in(count, n, peer, o_.chunk_floats)) continue;
        auto [off, len] = chunk_extent(peer, c);
        Header h{static_cast<std::uint64_t>(epoch), 0, static_cast<std::uint32_t>(rank_), off, static_cast<std::uint32_t>(len),
                 static_cast<std::uint32_t>(c)};
        post(peer, h, buf.data() + off, len);
        if (++sent % (n - 1) == 0) drain();
      }
    auto last_progress = Clock::now();
    auto stalled = [&] { return Clock::now() - last_progress > std::chrono::milliseconds(o_.stall_ms); };
    auto report = [&](const char* where) {
      std::string missing;
      for (int p = 0; p < n; ++p)
        if (p != rank_)
          for (std::size_t c = 0; c < own_chunks; ++c)
            if (!seen_[p * own_chunks + c]) missing += " " + std::to_string(p) + ":" + std::to_string(c);
      std::string inflight;
      for (int p = 0; p < n; ++p) inflight += " " + std::to_string(in_flight_[p]);
      std::fprintf(stderr,
                   "rank %d STALLED in %s of call %ld (count %zu): scatter reduced %zu/%zu, missing [%s ], gather left %zu, "
                   "done from peers %d, sends in flight [%s ], inbox %zu, early %zu, fetch timeouts %llu, unreadable %llu, "
                   "received eager %llu rndv %llu\n",
                   rank_, where, epoch, count, reduced, own_chunks, missing.c_str(), gather_remaining,
                   static_cast<int>(std::count(done_from_.begin(), done_from_.end(), 1)), inflight.c_str(), inbox_.size(),
                   early_.size(), static_cast<unsigned long long>(fetch_timeouts_), static_cast<unsigned long long>(unreadable_),
                   static_cast<unsigned long long>(eager_in_), static_cast<unsigned long long>(rndv_in_));
      sh_.failed = 1;
    };
    // Scatter-reduce, then all-gather.
    for (;;) {
      while (!ready.empty()) {
        const std::size_t c = ready.back();
        ready.pop_back();
        reduce(c);
        last_progress = Clock::now();
      }
      if (reduced == own_chunks && gather_remaining == 0) break;
      if (o_.engine_waits) {
        if (!transport_poll(Clock::now() + std::chrono::milliseconds(o_.stall_ms), drain)) {
          report(reduced == own_chunks ? "all-gather" : "scatter-reduce");
          return false;
        }
        continue;
      }
      if (drain()) {
        last_progress = Clock::now();
        continue;
      }
      if (sh_.failed || stalled()) {
        report(reduced == own_chunks ? "all-gather" : "scatter-reduce");
        return false;
      }
      wait_events(Clock::now() + std::chrono::milliseconds(o_.max_block_ms));
    }
    sh_.phase[rank_] = 1;
    // Done to every peer; wait until each peer is served.
    for (int k = 1; k < n; ++k) {
      Header h{static_cast<std::uint64_t>(epoch), 2, static_cast<std::uint32_t>(rank_), 0, 0, 0};
      post((rank_ + k) % n, h, nullptr, 0);
    }
    auto served = [&] {
      for (int p = 0; p < n; ++p)
        if (p != rank_ && !done_from_[p] && in_flight_[p] != 0) return false;
      return true;
    };
    last_progress = Clock::now();
    while (!served()) {
      if (o_.engine_waits) {
        if (!transport_poll(Clock::now() + std::chrono::milliseconds(o_.stall_ms), drain)) {
          report("finish");
          return false;
        }
        continue;
      }
      if (drain()) last_progress = Clock::now();
      if (served()) break;
      if (sh_.failed || stalled()) {
        report("finish");
        return false;
      }
      wait_events(Clock::now() + std::chrono::milliseconds(o_.max_block_ms));
    }
    sh_.phase[rank_] = 2;
    return true;
  }

  // Every rank reaches call `epoch` before any starts it, with no UCX progress meanwhile (what a
  // job's PMPI_Barrier between two engine calls does to the engine's worker). Times out.
  bool between_calls_barrier(long epoch) {
    sh_.arrived[rank_] = epoch;
    const auto until = Clock::now() + std::chrono::milliseconds(o_.stall_ms);
    for (;;) {
      bool all = true;
      for (int r = 0; r < o_.ranks; ++r) all = all && sh_.arrived[r] >= epoch;
      if (all) return true;
      if (sh_.failed) return false;
      if (Clock::now() > until) {
        std::fprintf(stderr, "rank %d STALLED in the barrier before call %ld (no UCX progress there)\n", rank_, epoch);
        sh_.failed = 1;
        return false;
      }
      sched_yield();
    }
  }

  // The engine's StagingPool::acquire in an exact call: the one staging buffer is taken again once
  // every send of the previous call completed; what arrives meanwhile is kept for the call.
  bool wait_for_previous_sends(long epoch) {
    auto idle = [&] { return std::all_of(in_flight_.begin(), in_flight_.end(), [](std::size_t f) { return f == 0; }); };
    auto deliver = [&] {
      while (!inbox_.empty()) {
        Arrived a = std::move(inbox_.front());
        inbox_.pop_front();
        if (a.h.kind == 3 || static_cast<long>(a.h.epoch) < epoch) {
          if (a.data) ucp_am_data_release(worker_, a.data);
          continue;
        }
        Early e{a.h, std::vector<float>(a.h.length)};
        if (a.h.length && !take(a, e.payload.data())) continue;
        if (!a.h.length && a.data) ucp_am_data_release(worker_, a.data);
        early_.push_back(std::move(e));
        ++early_kept_;
      }
    };
    while (!idle())
      if (!transport_poll(Clock::now() + std::chrono::milliseconds(o_.stall_ms), deliver)) {
        std::string inflight;
        for (int p = 0; p < o_.ranks; ++p) inflight += " " + std::to_string(in_flight_[p]);
        std::fprintf(stderr,
                     "rank %d STALLED before call %ld waiting for the previous call's sends: in flight [%s ], inbox %zu, "
                     "sends completed %llu\n",
                     rank_, epoch, inflight.c_str(), inbox_.size(), completions_);
        sh_.failed = 1;
        return false;
      }
    return true;
  }

  void close() {
    const auto until = Clock::now() + std::chrono::seconds(2);
    for (;;) {
      bool idle = true;
      for (int p = 0; p < o_.ranks; ++p) idle = idle && in_flight_[p] == 0;
      if (idle || Clock::now() > until) break;
      progress();
      for (auto& a : inbox_)
        if (a.data) ucp_am_data_release(worker_, a.data);
      inbox_.clear();
    }
    for (auto& a : inbox_)
      if (a.data) ucp_am_data_release(worker_, a.data);
    inbox_.clear();
    for (ucp_ep_h ep : eps_)
      if (ep) {
        ucp_request_param_t p{};
        p.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS;
        p.flags = UCP_EP_CLOSE_FLAG_FORCE;
        void* r = ucp_ep_close_nbx(ep, &p);
        if (UCS_PTR_IS_PTR(r)) {
          while (ucp_request_check_status(r) == UCS_INPROGRESS) ucp_worker_progress(worker_);
          ucp_request_free(r);
        }
      }
    ucp_worker_destroy(worker_);
    ucp_cleanup(context_);
  }

  bool fail(const char* what, ucs_status_t st) {
    std::fprintf(stderr, "rank %d: %s: %s\n", rank_, what, ucs_status_string(st));
    sh_.failed = 1;
    return false;
  }

  const Options& o_;
  Shared& sh_;
  int rank_;
  ucp_context_h context_ = nullptr;
  ucp_worker_h worker_ = nullptr;
  int efd_ = -1;
  std::vector<ucp_ep_h> eps_;
  std::vector<std::size_t> in_flight_;
  std::vector<SendCtx> ctx_;
  std::deque<Header> headers_;
  std::deque<Arrived> inbox_;
  std::vector<Early> early_;
  std::vector<float> slots_;
  std::vector<std::uint32_t> contributors_;
  std::vector<std::uint8_t> seen_, gseen_, done_from_;
  long epoch_ = 0;
  int hellos_ = 0;
  unsigned long long eager_in_ = 0, rndv_in_ = 0, fetches_ = 0, fetch_timeouts_ = 0, early_kept_ = 0, unreadable_ = 0,
                     sends_posted_ = 0, completions_ = 0,
                     completion_returns_ = 0, flush_waits_ = 0;
};

std::vector<std::size_t> parse_sizes(const char* s) {
  std::vector<std::size_t> out;
  std::string text(s);
  std::size_t at = 0;
  while (at < text.size()) {
    std::size_t end = text.find(',', at);
    if (end == std::string::npos) end = text.size();
    std::string item = text.substr(at, end - at);
    double v = std::atof(item.c_str());
    char unit = item.empty() ? 0 : item.back();
    if (unit == 'K' || unit == 'k') v *= 1024;
    if (unit == 'M' || unit == 'm') v *= 1024 * 1024;
    out.push_back(static_cast<std::size_t>(v) / sizeof(float));
    at = end + 1;
  }
  return out;
}

void usage() {
  std::puts(
      "usage: ucx-am-repro [options]\n"
      "  --ranks N          processes (default 3)\n"
      "  --steps N          steps of the bucket list (default 15)\n"
      "  --sizes LIST       buffer sizes in bytes (K/M suffix), reduced in this order each step;\n"
      "                     default: mpi.buckets' seven buckets 2.1 MiB .. 1 MiB\n"
      "  --chunk BYTES      chunk size (default 256K)\n"
      "  --no-eager-flag    do not set UCP_AM_SEND_FLAG_EAGER\n"
      "  --rndv-flag        set UCP_AM_SEND_FLAG_RNDV (instead of EAGER)\n"
      "  --no-reply         do not set UCP_AM_SEND_FLAG_REPLY\n"
      "  --no-mt-shared     context without mt_workers_shared\n"
      "  --spin             no UCP_FEATURE_WAKEUP: spin instead of arm + poll\n"
      "  --copy-eager       copy eager data in the callback (return UCS_OK)\n"
      "  --rndv-thresh X    UCX RNDV_THRESH of the context (e.g. inf, 0, 64K)\n"
      "  --rndv-scheme X    UCX RNDV_SCHEME (get_zcopy, put_zcopy, am, auto)\n"
      "  --tls X            UCX TLS of the context\n"
      "  --stall-ms N       no progress for N ms is a stall (default 15000)\n"
      "  --fetch-timeout-ms N (default 10000)\n"
      "  -v                 print the endpoint's lanes\n"
      "  --engine-waits     wait as the engine does over ucx/ucx_transport.cpp: conditions looked at only\n"
      "                     when poll() returns, poll() returns only when a message arrived; each call\n"
      "                     first waits for the previous call's sends (the staging buffer)\n"
      "  --return-on-completion  with --engine-waits: poll() also returns when a send completed\n"
      "  --gap-us N         the application's work between calls, without UCX progress (default 0)\n"
      "  --handle-us N      sleep N us (no progress) per data message taken (a descheduled rank)\n"
      "  --barrier          a barrier between calls that does not progress UCX (a job's PMPI_Barrier)\n"
      "  --flush-after-fetch  flush the endpoint to the sender after each rendezvous fetch (its ATS)\n"
      "exit: 0 all calls exact, 1 a wrong result, 2 a stall, 3 set-up failed");
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto next = [&]() -> const char* {
      if (i + 1 >= argc) {
        usage();
        std::exit(3);
      }
      return argv[++i];
    };
    if (a == "--ranks") o.ranks = std::atoi(next());
    else if (a == "--steps") o.steps = std::atoi(next());
    else if (a == "--sizes") o.counts = parse_sizes(next());
    else if (a == "--chunk") o.chunk_floats = parse_sizes(next()).at(0);
    else if (a == "--no-eager-flag") o.eager_flag = false;
    else if (a == "--rndv-flag") { o.rndv_flag = true; o.eager_flag = false; }
    else if (a == "--no-reply") o.reply_flag = false;
    else if (a == "--no-mt-shared") o.mt_shared = false;
    else if (a == "--spin") o.wakeup = false;
    else if (a == "--copy-eager") o.release_eager_late = false;
    else if (a == "--rndv-thresh") o.rndv_thresh = next();
    else if (a == "--rndv-scheme") o.rndv_scheme = next();
    else if (a == "--tls") o.tls = next();
    else if (a == "--stall-ms") o.stall_ms = std::atoi(next());
    else if (a == "--fetch-timeout-ms") o.fetch_timeout_ms = std::atoi(next());
    else if (a == "-v") o.verbose = true;
    else if (a == "--engine-waits") o.engine_waits = true;
    else if (a == "--gap-us") o.gap_us = std::atoi(next());
    else if (a == "--handle-us") o.handle_us = std::atoi(next());
    else if (a == "--barrier") o.barrier = true;
    else if (a == "--flush-after-fetch") o.flush_after_fetch = true;
    else if (a == "--return-on-completion") o.return_on_completion = true;
    else { usage(); return a == "-h" || a == "--help" ? 0 : 3; }
  }
  if (o.counts.empty())
    for (int b = 6; b >= 0; --b) o.counts.push_back((1024 + 155 * b) * 1024 / 4 + b);
  if (o.ranks < 2 || o.ranks > 16) return 3;
  auto* sh = static_cast<Shared*>(mmap(nullptr, sizeof(Shared), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0));
  new (sh) Shared{};
  pthread_barrierattr_t ba;
  pthread_barrierattr_init(&ba);
  pthread_barrierattr_setpshared(&ba, PTHREAD_PROCESS_SHARED);
  pthread_barrier_init(&sh->barrier, &ba, o.ranks);
  std::vector<pid_t> pids;
  for (int r = 0; r < o.ranks; ++r) {
    pid_t pid = fork();
    if (pid == 0) {
      Rank rank(o, *sh, r);
      const int code = rank.run();
      std::fflush(stdout);
      std::fflush(stderr);
      _exit(code);
    }
    pids.push_back(pid);
  }
  int worst = 0;
  for (pid_t pid : pids) {
    int status = 0;
    waitpid(pid, &status, 0);
    const int code = WIFEXITED(status) ? WEXITSTATUS(status) : 4;
    worst = std::max(worst, code);
  }
  if (worst) std::printf("FAILED (exit %d)\n", worst);
  return worst;
}
