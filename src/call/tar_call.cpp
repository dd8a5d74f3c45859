#include "optireduce/engine/call/tar_call.hpp"

#include <algorithm>
#include <cstring>

#include "optireduce/byte_order.hpp"
#include "optireduce/engine/clock_us.hpp"
#include "optireduce/engine/log.hpp"
#include "optireduce/engine/tar/schedule.hpp"

namespace optireduce {

TarCall::TarCall(EngineState& state, TransportPath& path, const TarRequest& request, CallStats stats,
                 Clock::time_point start)
    : s_(state),
      path_(path),
      transport_(*path.transport),
      request_(request),
      probe_(request.probe),
      stats_(std::move(stats)),
      start_(start),
      hard_deadline_(stats_.kind == CallKind::bounded || request.probe ? start + state.options.timeout
                                                                       : watchdog_from(state, request, start) + state.options.watchdog),
      element_bytes_(request.shape.element_bytes()) {}

Status TarCall::wait(Clock::time_point deadline, const std::function<bool()>& done) {
  auto handler = [this](const InboundMessage& m) { handle(m); };
  // A peer's failure notice, once handled, fails the call here too, even where what the wait
  // needs came with it: that peer failed the call, whatever this rank has (a late rank finds its
  // data, its peers' words and their notices waiting, and handles them all in one poll).
  for (;;) {
    if (!s_.peer_failure.ok()) return s_.peer_failure;
    if (done()) return {};
    if (Clock::now() >= deadline) {
      // What already arrived counts: a rank descheduled past its deadline reads it only now, and
      // a peer's word that came in time must not be taken for one that never came.
      if (drain_arrived(1) && s_.peer_failure.ok() && done()) return {};
      return s_.peer_failure.ok() ? Timeout("no progress from the peers") : s_.peer_failure;
    }
    Status st = poll_alive(deadline, handler);
    if (!st.ok() && st.code() != StatusCode::timeout) return st;
  }
}

CallStats TarCall::run() {
  if (injects_faults()) s_.faults.maybe_delay_entry();
  s_.call_entered_ns = std::chrono::duration_cast<std::chrono::nanoseconds>(
                           std::chrono::system_clock::now().time_since_epoch()).count();
  if (!request_.failed_here.ok()) return give_up();
  Status st;
  StagingBuffer* staging = path_.staging.acquire(transport_, bounded(), s_.epoch, hard_deadline_,
                                              [this](Clock::time_point d, const std::function<bool()>& done) { return wait(d, done); }, st);
  if (!staging) return fail(st);
  begin(*staging);
  stage_input();
  // The all-gather sends read the sums (sums()); where that is the staging buffer, the pass that
  // completes a chunk writes the output too. In the Hadamard domain the own shard is encoded by a
  // worker meanwhile: contributions wait in slots until the reduce.
  s_.scatter.bind(own_source_, sums(), scatter_only() || transformed_ || sums_in_output() ? nullptr : output(), !transformed_,
                  sums_origin());
  // Deadlines and phase times count from here: encoding is this rank's own work, not the
  // network's, and calibration calls (which never encode) must measure the same thing.
  const auto scatter_start = Clock::now();
  replay_early();
  if (!s_.peer_failure.ok()) return fail(s_.peer_failure);
  budget_ = budget();
  stats_.deadline_us = bounded() ? budget_.us : PhaseTimes{};
  start_liveness();
  if (st = run_scatter_reduce(scatter_start); !st.ok()) return fail(st);
  const auto gather_start = Clock::now();
  if (scatter_only()) {
    if (st = finish_reduce_scatter(); !st.ok()) return fail(st);
    release_caller_buffers();
    // In place, the block goes where the input began only now: no send reads the input any more.
    if (in_place())
      std::memcpy(output(), staged() + s_.layout.shard_begin(s_.rank) * element_bytes_, s_.layout.shard_size(s_.rank) * element_bytes_);
    teach_deadlines(scatter_start, gather_start);
    if (!probe_) stats_.dropped_entries = s_.ledger.dropped();
    stats_.latency_us = us_since(start_);
    return stats_;
  }
  const auto gather_deadline = after_us(gather_start, budget_.us[1]);
  if (st = run_all_gather(gather_start, gather_deadline); !st.ok()) return fail(st);
  if (st = finish_sends(gather_deadline); !st.ok()) return fail(st);
  release_caller_buffers();
  teach_deadlines(scatter_start, gather_start);
  if (!probe_) {
    stats_.dropped_entries = s_.ledger.dropped();
    stats_.filled_entries = s_.ledger.filled();
    stats_.fill_hash = s_.ledger.fill_hash();
  }
  stats_.latency_us = us_since(start_);
  return stats_;
}

void TarCall::replay_early() {
  std::uint64_t stale = 0;
  s_.early.replay(s_.epoch, [this](const WireHeader& h, std::span<const std::byte> payload) {
    std::array<std::byte, WireHeader::kEncodedSize> bytes;
    encode(h, bytes);
    InboundMessage m;
    m.source = static_cast<int>(h.source);
    m.header = bytes;
    m.payload = payload;
    m.payload_size = payload.size();
    m.arrived = Clock::now();
    handle(m);
  }, stale);
  s_.rejects.stale += stale;
}

Status TarCall::run_scatter_reduce(Clock::time_point scatter_start) {
  OR_RETURN_IF_ERROR(send_scatter());
  reduce_ready();
  OR_RETURN_IF_ERROR(run_phase(0, after_us(scatter_start, budget_.us[0]), [&] { return s_.scatter.complete(); },
                               [&](int) { return s_.scatter.expects_data(); }));
  if (!s_.scatter.complete()) {
    if (!cuts_scatter_reduce()) return Timeout("the scatter-reduce did not complete");
    scatter_closed_ = Clock::now();
    log_scatter_cut(scatter_start);
    stats_.cut = true;
    for (std::uint32_t c : s_.scatter.open_chunks()) reduce(c);
  }
  stats_.phase_us[0] = us_since(scatter_start);
  return {};
}

Status TarCall::run_all_gather(Clock::time_point gather_start, Clock::time_point gather_deadline) {
  OR_RETURN_IF_ERROR(run_phase(1, gather_deadline, [&] { return s_.gather.complete(); },
                               [&](int p) { return s_.layout.chunks_in_shard(p) > 0; }));
  if (!s_.gather.complete() && !cuts_scatter_reduce()) return Timeout("the all-gather did not complete");
  if (!s_.gather.complete()) stats_.cut = true;
  // A call that may cut only its scatter-reduce lacks chunks only at its hard deadline: it fills
  // them with the lists that came by then, which is what this rank knows.
  if ((cuts_all_gather() || !s_.gather.complete()) && s_.ranks > 1 &&
      (request_.exact_by_resends || (!probe_ && s_.options.fill_agreed()))) {
    stats_.fill_agreed = agree_on_fill();
    if (!stats_.fill_agreed && !probe_) ++s_.agreed.fill_agreement_incomplete;
    // Lists that may be lost are asked for until every rank has them; where they never came, the
    // call fails on every rank (call/list_exchange.cpp) rather than leave replicas apart.
    if (!stats_.fill_agreed && !request_.exact_by_resends && list_copies_ > 1)
      return s_.peer_failure.ok() ? Timeout("the ranks' lists of missing chunks did not all come: no fill every rank agrees on") : s_.peer_failure;
  }
  if (request_.exact_by_resends && s_.ranks > 1) {
    if (!s_.peer_failure.ok()) return s_.peer_failure;
    if (!stats_.fill_agreed) return Timeout("no list of missing chunks told whether the calibration call was exact everywhere");
    stats_.cut = !exact_everywhere();
  }
  serving_resends_ = false;
  if (!s_.gather.complete()) s_.gather.fill_missing(gather_target(), s_.options.fill, scatter_source_, s_.ledger);
  if (transformed_) s_.hadamard.finish();
  stats_.phase_us[1] = us_since(gather_start);
  return {};
}

void TarCall::begin(StagingBuffer& staging) {
  ++s_.epoch;
  s_.in_call = true;
  staging_ = &staging;
  const std::uint64_t count = request_.count;
  const TransportTraits traits = transport_.traits();
  // A chunk is as many bytes whatever the format (the setting counts float32 elements).
  const std::size_t fits = (traits.max_message_bytes - WireHeader::kEncodedSize) / element_bytes_;
  const std::size_t wanted = std::size_t{s_.options.chunk_elems} * sizeof(float) / element_bytes_;
  const auto chunk_elems = static_cast<std::uint32_t>(std::max<std::size_t>(1, std::min(wanted, fits)));
  s_.shape = request_.shape;
  s_.layout = scatter_only() ? ShardLayout(request_.blocks, chunk_elems) : ShardLayout(count, s_.ranks, chunk_elems);
  s_.largest_call_bytes = std::max<std::size_t>(s_.largest_call_bytes, count * element_bytes_);
  last_slices_ = traits.ordered ? kLastSlicesInOrder : kLastSlicesDatagrams;
  abandons_sends_ = traits.can_abandon_sends;
  decide_cuts(traits.reliable);
  if (scatter_only()) cuts_gather_ = false;  // there is no all-gather
  s_.scatter.begin(s_.layout, s_.rank, last_slices_, request_.shape.format);
  s_.gather.begin(s_.layout, s_.rank, request_.shape.format);
  s_.ledger.begin(s_.layout);
  s_.fill.begin(s_.layout, s_.ledger.total_chunks(), traits.max_message_bytes - WireHeader::kEncodedSize, s_.rank,
                figures_rider());
  s_.stamps.reset(s_.ranks);
  for (auto& l : s_.last_slices) l.begin(s_.ranks);
  s_.done_from.assign(static_cast<std::size_t>(s_.ranks), 0);
  s_.heard_from.assign(static_cast<std::size_t>(s_.ranks), 0);
  s_.heard_from[static_cast<std::size_t>(s_.rank)] = 1;
  unheard_ = s_.ranks - 1;
  s_.heard_at.assign(static_cast<std::size_t>(s_.ranks), start_);
  s_.posted_at.assign(static_cast<std::size_t>(s_.ranks), start_);
  s_.heard_again_at.assign(static_cast<std::size_t>(s_.ranks), Clock::time_point{});
  // One header slot per send of this call, sized up front: a transport reads a header until its
  // send completes. Scatter: every chunk of every other shard once; all-gather: every own chunk
  // to every peer; a "done" to every peer; the missing lists (FillAgreement::copies).
  // Resends: every data send again once per round, and a request per round, phase and peer. A
  // call made exact by resends: the lists it sends to say it has decided, to ask, and to answer.
  const std::uint32_t own = s_.layout.chunks_in_shard(s_.rank);
  // Resends only where data can be lost, and not where losing it is the point (fault injection).
  s_.resends.begin(s_.ranks, traits.reliable || s_.options.faults.drop > 0 ? 0 : s_.options.resend_rounds);
  const std::size_t data_sends = static_cast<std::size_t>(s_.ledger.total_chunks() - own) + std::size_t{own} * (s_.ranks - 1);
  list_copies_ = FillAgreement::copies(traits.reliable);
  const int list_sends = list_copies_ + (list_copies_ > 1 ? kDecidedCopies + 2 * kMostAsks : 0);
  const std::size_t sends = data_sends + static_cast<std::size_t>(1 + list_sends * s_.fill.pieces_per_rank()) * (s_.ranks - 1) +
                            s_.resends.rounds() * (data_sends + kTarPhases * (s_.ranks - 1)) + 1;
  asks_ = 0;
  answers_.assign(static_cast<std::size_t>(s_.ranks), 0);
  StagingPool::prepare(staging, (count * element_bytes_ + sizeof(float) - 1) / sizeof(float), sends, s_.ranks);
  beat_header_ = staging.next_header().data();
  // Allreduces of every format (16-bit ones in float32, rounded to travel: docs/design.md); not a
  // reduce-scatter, whose result is the owner's shard itself.
  transformed_ = bounded() && !probe_ && !scatter_only() &&
                 (s_.options.hadamard == HadamardMode::on ||
                  (s_.options.hadamard == HadamardMode::automatic && s_.loss_budget.hadamard_active()));
  stats_.transformed = transformed_;
  stats_.transport = path_.name;
}

PhaseDeadlines TarCall::budget() const {
  if (probe_) return *probe_;
  if (bounded()) return s_.deadlines.bounded_budget(request_.size_class, double(request_.count * element_bytes_));
  PhaseDeadlines unbounded;
  unbounded.us.fill(std::chrono::duration<double, std::micro>(s_.options.watchdog).count());
  return unbounded;
}

template <typename Complete, typename SendsToMe>
Status TarCall::run_phase(std::size_t phase, Clock::time_point phase_deadline, Complete&& complete, SendsToMe&& sends_to_me) {
  auto phase_start = Clock::now();
  // A phase that may not be cut has no deadline short of the hard one to wake up for.
  const bool cuts = phase == 0 ? cuts_scatter_reduce() : cuts_all_gather();
  auto deadline = cuts ? std::min(phase_deadline, hard_deadline_) : hard_deadline_;
  bool grace_set = false;
  bool entry_pending = false;  // held at the deadline for a peer that has not entered
  const auto resend_wait = us_duration(DeadlineController::resend_wait_us(budget_.us[phase]));
  const auto follow_wait = us_duration(DeadlineController::follow_wait_us(budget_.us[phase]));
  auto handler = [this](const InboundMessage& m) { handle(m); };
  const auto stalled_before = stalled_;
  bool held_late = false;  // past its deadline for data a late or stalled peer still owes
  while (!complete()) {
    if (entry_pending && unheard_ == 0) {
      // The last peer entered the call: the phase's budget counts from then.
      entry_pending = false;
      if (all_heard_at_ > phase_start) {
        phase_deadline = std::max(phase_deadline, after_us(all_heard_at_, budget_.us[phase]));
        phase_start = all_heard_at_;
      }
      if (!grace_set) deadline = std::min(phase_deadline, hard_deadline_);
    }
    if (cuts && !grace_set && s_.last_slices[phase].all_in(s_.rank, sends_to_me)) {
      // What is missing now is lost rather than in flight: asked for again (tar/resend.hpp), it is
      // waited for a round trip per round; otherwise only a grace.
      if (!asks_resends()) deadline = std::min(deadline, after_us(Clock::now(), DeadlineController::grace_us(budget_.us[phase])));
      grace_set = true;
    }
    const bool resending = grace_set && asks_resends();
    // Not before the last slices announced have had time to come: they are in flight, not lost.
    const auto ask_from = resending ? s_.last_slices[phase].settled_at(s_.rank, sends_to_me, follow_wait) : Clock::time_point::min();
    // Asked before the deadline; a phase held for a late or stalled peer asks once that peer's last
    // slices are in, for as long as it is held (waiting would not bring a lost datagram).
    const auto ask_before = held_late ? deadline : phase_deadline;
    if (resending && Clock::now() >= ask_from && s_.resends.due(phase, Clock::now(), ask_before, resend_wait)) {
      ask_for_missing(phase);
      if (s_.resends.all_asked(phase)) deadline = std::min(deadline, s_.resends.gives_up_at(phase, resend_wait));
    }
    if (Clock::now() >= deadline) {
      if (!cuts) {
        (void)drain_arrived(phase);  // what already arrived counts (the caller sees whether it completed)
        break;
      }
      // What already arrived counts (a rank that was descheduled reads it only now).
      if (drain_arrived(phase) && complete()) break;
      // Until the last slices announced have had time to come, the senders' data still flows.
      const bool settled = grace_set && Clock::now() >= s_.last_slices[phase].settled_at(s_.rank, sends_to_me, follow_wait);
      // The phase may stretch by as long as a stall held a rank in it, too.
      const bool lost = settled && lost_for_good(phase, resend_wait);
      const auto hold = keep_waiting_until(phase, phase_start + (stalled_ - stalled_before), settled, lost);
      held_late = hold.why == PhaseHold::late || hold.why == PhaseHold::entry;
      if (hold.until <= Clock::now()) break;
      if (hold.until > phase_deadline) stats_.held[phase] = stronger(stats_.held[phase], hold.why);
      deadline = hold.until;
      if (hold.until == hard_deadline_ && unheard_ > 0) entry_pending = waited_for_entry_ = true;
    }
    if (!s_.peer_failure.ok()) return s_.peer_failure;
    const auto wake = resending ? std::min(deadline, std::max(ask_from, s_.resends.next_due(phase, resend_wait))) : deadline;
    Status st = poll_alive(wake, handler);
    if (!st.ok() && st.code() != StatusCode::timeout) return st;
    if (phase == 0) reduce_ready();
  }
  // A bounded phase that does not cut (a reliable transport) waits for what is late, not lost.
  if (bounded() && !cuts && Clock::now() > phase_deadline) stats_.held[phase] = PhaseHold::late;
  return {};
}

bool TarCall::drain_arrived(std::size_t phase) {
  auto handler = [this](const InboundMessage& m) { handle(m); };
  bool any = false;
  for (;;) {
    const Status st = transport_.poll(Clock::time_point::min(), handler);
    if (!st.ok()) break;
    any = true;
    if (phase == 0) reduce_ready();
  }
  note_running();  // a stop while draining is this rank's own too
  return any;
}

void TarCall::reduce_ready() {
  while (auto c = s_.scatter.next_ready()) reduce(*c);
}

void TarCall::reduce(std::uint32_t chunk) {
  if (transformed_) s_.hadamard.await_encoded(s_.rank);
  const ReducedChunk r = s_.scatter.reduce(chunk);
  if (r.partial) s_.ledger.drop(s_.ledger.global_chunk(s_.rank, chunk), r.extent.length);
  if (transformed_ && s_.scatter.complete()) s_.hadamard.shard_final(s_.rank);
  if (scatter_only()) return;  // the owner keeps its shard
  std::uint16_t flags = r.last ? WireHeader::last_slice_flags(r.follow) : 0;
  if (r.partial) flags |= WireHeader::kFlagPartial;
  const std::byte* reduced = sums();
  for (int k = 1; k < s_.ranks; ++k) {
    const int peer = rotation_peer(s_.rank, s_.ranks, k);
    if (!send(peer, MessageKind::gather_chunk, r.extent, flags, reduced).ok()) OR_LOG(warn, "all-gather send to rank %d failed", peer);
  }
}

bool TarCall::peers_served() const {
  for (int p = 0; p < s_.ranks; ++p) {
    if (p == s_.rank) continue;
    const bool queued = transport_.sends_in_flight(p) != 0 || transport_.acknowledgements_pending(p) != 0;
    // A peer that said it has all it needs takes nothing more from this rank where what is still
    // queued is dropped at the call's end (datagrams: nothing it waits for comes from here). Where
    // it is not (UCX), it leaves only while this rank polls, and that peer may still wait for it:
    // this rank's "done", or the acknowledgement its own rendezvous sends wait for (design.md, "A
    // call ends once its word has left").
    if (queued && (!s_.done_from[p] || !abandons_sends_)) return false;
  }
  return true;
}

Status TarCall::finish_sends(Clock::time_point gather_deadline) {
  // Tell the peers we have what we need, and keep driving our own queued sends until each peer
  // has them (a shared-memory FIFO only moves while its sender progresses). A bounded call whose
  // peers may cut their all-gathers stops at its deadline whatever is still queued; where they
  // may not, they wait for what is queued here, so this rank serves them as an exact call does.
  // A list of missing chunks already said so (a peer's all-gather takes nothing after it).
  // Over datagrams a reduce-scatter's peer whose word did not come by the deadline given here
  // (a probe's agreement window; a bounded call's list exchange heard every peer) has closed its
  // block by then, without what is still queued for it, and may have left the call succeeded
  // (its words lost): this rank leaves what is queued rather than fail the call at its hard
  // deadline for that peer.
  Status st;
  const bool leaves_queued = cuts_all_gather() || (scatter_only() && !transport_.traits().reliable);
  if (!sent_list_ && !said_done_)
    for (int k = 1; k < s_.ranks && st.ok(); ++k)
      st = send(rotation_peer(s_.rank, s_.ranks, k), MessageKind::peer_done, {0, 0}, WireHeader::kFlagLastSlice, nullptr);
  if (st.ok()) {
    st = wait(leaves_queued ? std::min(gather_deadline, hard_deadline_) : hard_deadline_, [&] { return peers_served(); });
    if (leaves_queued && st.code() == StatusCode::timeout) st = {};
  }
  s_.in_call = false;
  s_.note_closed(s_.epoch, Clock::now());
  if (st.ok()) path_.staging.seal(*staging_);
  return st;
}

Status TarCall::finish_reduce_scatter() {
  const bool datagrams = !transport_.traits().reliable;
  if (datagrams && s_.ranks > 1 && stats_.kind == CallKind::bounded && !probe_) {
    // A bounded reduce-scatter over datagrams ends as a bounded allreduce does: its word that its
    // block is closed is its list (naming no chunk: there is no all-gather to fill), exchanged
    // until every rank has every rank's, or failed on every rank (call/list_exchange.cpp). A rank
    // that never heard from a peer does not leave succeeded: that peer may enter later, flagged
    // (a three-stage call's host that failed its part), and fail the call alone.
    s_.fill.build_own_list(nullptr, s_.ledger, s_.rank, staging_->missing);
    sent_list_ = true;
    const bool known = exchange_lists();
    serving_resends_ = false;
    if (!known)
      return s_.peer_failure.ok() ? Timeout("the ranks' words that their blocks are closed did not all come: no outcome every rank agrees on")
                                  : s_.peer_failure;
    // Every peer said its block is closed: what is still queued for it is not needed.
    return finish_sends(Clock::now());
  }
  // Twice over a transport that may lose one, like the lists that end an allreduce.
  for (int copy = 0; copy < FillAgreement::copies(!datagrams); ++copy)
    for (int k = 1; k < s_.ranks; ++k)
      (void)send(rotation_peer(s_.rank, s_.ranks, k), MessageKind::peer_done, {0, 0}, WireHeader::kFlagLastSlice, nullptr);
  said_done_ = true;
  auto all_done = [&] {
    for (int p = 0; p < s_.ranks; ++p)
      if (p != s_.rank && !s_.done_from[p]) return false;
    return true;
  };
  if (!datagrams && s_.ranks > 1) {
    // A rank's block needs only what is sent to it: one whose block is complete (at once where
    // it is empty) stays until every rank said its own is, so that none leaves succeeded while a
    // peer fails the call (whose failure agreement would then wait for it, or part the outcomes).
    // Every word comes: a peer's that does not has failed the call (its notice ends this wait).
    OR_RETURN_IF_ERROR(wait(hard_deadline_, all_done));
  } else if (datagrams && s_.ranks > 1) {
    // A peer whose shard still lacks this rank's data asks for it again until its phase closes:
    // at the latest its stretch limits after the last peer's entry, at least a budget from now.
    const auto last_entry = unheard_ == 0 ? std::max(all_heard_at_, start_) : Clock::now();
    const auto until = std::min(
        std::max(after_us(Clock::now(), DeadlineController::agreement_wait_us(budget_.us[0])), peers_close_by(last_entry)), hard_deadline_);
    const Status st = wait(until, all_done);
    // A peer whose words were all lost is past its phase by now: what is still queued for it is
    // left (finish_sends), not waited for until the hard deadline.
    if (!st.ok() && st.code() != StatusCode::timeout) return st;
    serving_resends_ = false;
    return finish_sends(until);
  }
  serving_resends_ = false;
  return finish_sends(hard_deadline_);
}

void TarCall::teach_deadlines(Clock::time_point scatter_start, Clock::time_point gather_start) {
  // A wait for a peer that had not entered is not the network's time: the scatter-reduce is
  // timed from that peer's arrival.
  const auto scatter_from = waited_for_entry_ ? std::max(scatter_start, all_heard_at_) : scatter_start;
  const double scatter_us = stats_.phase_us[0] - std::chrono::duration<double, std::micro>(scatter_from - scatter_start).count();
  const PhaseTimes needed{
      DeadlineController::needed_us(scatter_us, s_.scatter.received_fraction(), scatter_from, s_.scatter.last_arrival()),
      DeadlineController::needed_us(stats_.phase_us[1], s_.gather.received_fraction(), gather_start, s_.gather.last_arrival())};
  // The peers stamped this call's messages with their estimates of the call before it (the same
  // call on every rank), which may be of another size or class.
  const std::uint64_t described = s_.my_estimate_bytes;
  // A bounded call that waited out a stall measured the stall, not the network: it keeps the
  // estimate it had (probes never count stalls).
  const unsigned described_class = s_.my_estimate_class;
  if (stalled_ == Clock::duration::zero()) {
    s_.my_estimate_us = needed;
    s_.my_estimate_bytes = request_.count * element_bytes_;
    s_.my_estimate_class = request_.size_class;
  }
  auto learn_stamps = [&] {
    if (described) s_.deadlines.record_estimate(described_class, s_.stamps.medians(), double(described));
  };
  if (probe_) {
    // What a run of the datagram path teaches the calibration, the engine decides from `needed`
    // (Engine::teach_calibration): a calibration call made exact by resends teaches only once the
    // ranks agreed whether it was.
    learn_stamps();
    return;
  }
  if (!request_.teaches) return;
  if (stats_.kind == CallKind::calibration || stats_.kind == CallKind::fallback)
    s_.record_calibration(request_.size_class, stats_.phase_us, request_.count * element_bytes_);
  // Fallback calls run exactly but keep teaching the deadlines, so they are right when bounded
  // calls resume.
  if (bounded() || stats_.kind == CallKind::fallback) learn_stamps();
}

}  // namespace optireduce
