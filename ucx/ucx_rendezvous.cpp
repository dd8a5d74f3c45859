// The UCX transport's rendezvous receive: fetching a payload still at its sender into the
// destination the engine names, and pushing out the acknowledgement its sender's send waits for.
// Every wait here is bounded; a fetch that cannot be finished gives the transport up.
#include <ucp/api/ucp.h>

#include <algorithm>

#include "optireduce/log.hpp"
#include "optireduce/ucx/ucx_transport_impl.hpp"

namespace optireduce::ucx::detail {

namespace {

long long ms_of(Clock::duration d) { return static_cast<long long>(std::chrono::duration_cast<std::chrono::milliseconds>(d).count()); }

}  // namespace

bool UcxTransport::fetch(Arrived& a, std::span<std::byte> dst) {
  if (dst.size() != a.length || a.fetched || abandoned_) return false;
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
  if (req == nullptr) {
    push_out(a.source);
    return true;
  }
  if (UCS_PTR_IS_ERR(req)) return false;
  // The destination may be the caller's buffer, so the fetch completes (or is cancelled and
  // finished) before this returns: nothing may write there after the engine call is over.
  const auto give_up = Clock::now() + fetch_timeout_;
  // The sender must run to answer, and with more ranks than cores a spin here would hold its
  // core: wait for events as poll() does.
  while (!fetch.done && Clock::now() < give_up) wait_for_events(give_up);
  if (!fetch.done) {
    // UCX 1.13 cancels tag receives only: for this one the cancel changes nothing, and what
    // follows is a last, bounded wait for the transfer itself.
    ucp_request_cancel(worker_, req);
    const auto last = Clock::now() + after_cancel_;
    while (!fetch.done && Clock::now() < last) wait_for_events(last);
  }
  if (!fetch.done) {
    abandon_fetch(req, a.source, dst.size());
    return false;
  }
  ucp_request_free(req);
  push_out(a.source);
  return fetch.status == UCS_OK;
}

void UcxTransport::abandon_fetch(void* request, int source, std::size_t bytes) {
  // Freed, the request calls back no more (its Fetch is gone), but the transfer stays UCX's: a
  // progress of this worker could finish it into a destination that is no longer the engine's.
  // So the worker is never progressed again: every poll() fails from here (the engine fails the
  // call and agrees it with its peers; the communicator's engine takes no more calls), and
  // close() destroys the worker without flushing it.
  ucp_request_free(request);
  abandoned_ = true;
  failed_ = true;
  OR_LOG(error, "a UCX rendezvous fetch of %zu bytes from rank %d did not complete within %lld ms (nor %lld ms after its cancel): this communicator's UCX transport is given up",
         bytes, source, ms_of(fetch_timeout_), ms_of(after_cancel_));
}

// A rendezvous send completes at its sender only when the receiver's acknowledgement (ATS)
// arrives, and the receiver's UCX sends it from its own progress: queued behind a full FIFO, it
// leaves only while the receiver progresses. A receiver that then ended its call (its peers had
// all said done) and went into the job's own MPI left the sender waiting for the ATS, and for
// the receiver's "done" queued behind it, until the receiver's next engine call: mpi.buckets and
// bench.sh's latency runs hung in finish_sends. So the ATS of a fetched or refused payload is
// pushed out (the endpoint flushed) before the engine hears of the message. It is one peer's
// queue, and that peer is in the call (it waits for this rank's "done" or for this very ATS), so
// it drains. The flush waits for everything queued to that peer, though, not only the ATS: when
// the peer does not progress (a late payload refused after its sender moved on) it waits at
// most until the poll's deadline (so a bounded call keeps to its budget) or kFetchTimeout, and
// the flush then finishes in later polls: the call does not end before (TarCall::peers_served).
// The wait sleeps between looks (no spin: the peer that must drain the queue may need this
// core), and while it waits the flush counts as a send in flight, so each block is short (the
// peer draining its FIFO wakes nothing here).
void UcxTransport::push_out(int peer) {
  if (abandoned_ || peer < 0 || static_cast<std::size_t>(peer) >= endpoints_.size() || !endpoints_[peer]) return;
  ucp_request_param_t param{};
  void* req = ucp_ep_flush_nbx(endpoints_[peer], &param);
  if (!UCS_PTR_IS_PTR(req)) return;
  flushes_.push_back({peer, req});
  const auto give_up = std::min(poll_deadline_, Clock::now() + kFetchTimeout);
  while (ucp_request_check_status(req) == UCS_INPROGRESS && Clock::now() < give_up) wait_for_events(give_up, WhenBusy::sleep);
  if (ucp_request_check_status(req) == UCS_INPROGRESS) {
    OR_LOG(debug, "UCX: what this rank queued for rank %d has not left yet", peer);
    return;
  }
  std::erase_if(flushes_, [req](const Flush& f) { return f.request == req; });
  ucp_request_free(req);
}

bool UcxTransport::reap_flushes() {
  return std::erase_if(flushes_, [](const Flush& f) {
           if (ucp_request_check_status(f.request) == UCS_INPROGRESS) return false;
           ucp_request_free(f.request);
           return true;
         }) != 0;
}

std::size_t UcxTransport::acknowledgements_pending(int peer) const {
  return static_cast<std::size_t>(std::count_if(flushes_.begin(), flushes_.end(), [peer](const Flush& f) {
    return f.peer == peer && ucp_request_check_status(f.request) == UCS_INPROGRESS;
  }));
}

}  // namespace optireduce::ucx::detail
