// One Transpose AllReduce over a transport: scatter-reduce, then all-gather, each phase under
// its deadline when the call is bounded, and (bounded calls) the end-of-call fill agreement; or a
// reduce-scatter, the scatter-reduce alone. Constructed per call on the stack; everything it
// keeps between calls is in EngineState.
#pragma once

#include <cstdint>
#include <optional>
#include <span>

#include "optireduce/engine/clock_us.hpp"
#include "optireduce/engine/engine/state.hpp"
#include "optireduce/engine/tar/inbound.hpp"
#include "optireduce/engine/engine/transport_path.hpp"

namespace optireduce {

struct TarRequest {
  const void* input = nullptr;
  void* output = nullptr;
  std::uint64_t count = 0;   // elements of the input (a reduce-scatter's: all the blocks)
  unsigned size_class = 0;   // the call's class (deadlines/controller.hpp: call_class)
  CallShape shape;
  // A reduce-scatter: every rank's block, in elements, whose sum over ranks this rank's output
  // holds alone (its shard: the layout follows them). In place (input == output), the input is
  // the output buffer and the block is written at its start once no send reads it any more.
  std::span<const std::uint64_t> blocks;
  // A timing run of the datagram path on the data of an exact call (whose result came from the
  // bootstrap), within this budget: it teaches the deadlines and returns nothing to the caller.
  const PhaseDeadlines* probe = nullptr;
  // Whether an exact call's phase times teach the deadlines (calibration, fallback): not when
  // bounded calls run over another transport, which a probe then times instead.
  bool teaches = true;
  // A probe that is a calibration call made exact by resends (Engine::calibrate_over_datagrams):
  // its ranks stay in the call, answering resends, until the lists of missing chunks tell whether
  // it was exact everywhere (call/exactness.cpp); its `cut` then says whether any rank's
  // result lacks data, the same on every rank.
  bool exact_by_resends = false;
  // The exact rerun of such a run: its watchdog counts from here, not from the call's start
  // (the run used that time up, and a peer may still be in it: longest_exchange_lag).
  Clock::time_point waits_from{};
  // Not ok: this rank's caller failed its part before the call (its input is not to be used;
  // hierarchy/host_tiers.hpp). The call gives up at once and tells the peers, who fail it too.
  Status failed_here;
};

class TarCall {
 public:
  TarCall(EngineState& state, TransportPath& path, const TarRequest& request, CallStats stats, Clock::time_point start);
  CallStats run();

  // Handles one arrived message (also while the call waits for a staging buffer, before it began).
  void handle(const InboundMessage& message);

  // How long after this rank left a list exchange a peer may still be in it (call/list_exchange.cpp):
  // until its hard deadline, later by as much as it heard from its last peer later, and a notice's
  // wait (twice where it was stopped past the first).
  static Clock::duration longest_exchange_lag(const EngineOptions& options) {
    return 2 * std::chrono::duration_cast<Clock::duration>(options.timeout) + 2 * us_duration(DeadlineController::notice_wait_us());
  }

 private:
  // From when an exact call's watchdog counts: its start, or later (waits_from, and the last
  // moment a peer may still be in this rank's last list exchange).
  static Clock::time_point watchdog_from(const EngineState& state, const TarRequest& request, Clock::time_point start);
  bool bounded() const { return stats_.kind == CallKind::bounded || probe_; }
  bool scatter_only() const { return request_.shape.scatter_only(); }
  bool in_place() const { return request_.input == request_.output; }
  const std::byte* input() const { return static_cast<const std::byte*>(request_.input); }
  std::byte* output() const { return static_cast<std::byte*>(request_.output); }
  std::byte* staged() const { return reinterpret_cast<std::byte*>(staging_->data.data()); }
  bool injects_faults() const { return stats_.kind == CallKind::bounded && !probe_; }
  // What a call may close with data missing before its hard deadline (the same answer on every
  // rank: decide_cuts in call/fill.cpp). A bounded call that may cut neither phase runs as an
  // exact call does: the caller's buffers in place, no staging, and no fill agreement.
  bool cuts_scatter_reduce() const { return cuts_scatter_; }
  bool cuts_all_gather() const { return cuts_gather_; }
  void decide_cuts(bool reliable_transport);
  Status wait(Clock::time_point deadline, const std::function<bool()>& done);

  void begin(StagingBuffer& staging);
  void stage_input();
  // A call that may cut, over a transport that cannot abandon its sends: its scatter sends read a
  // copy of each chunk, made just before the send (stage_for_send).
  bool stages_each_send() const { return cuts_scatter_reduce() && !transformed_ && !abandons_sends_; }
  void stage_for_send(const Extent& chunk);
  // Where the reduce writes its sums, which the all-gather sends (and resends) read: the output,
  // unless a send may outlive the call there (a call that may cut, over a transport that cannot
  // drop its queued sends) or the sums are in the Hadamard domain; then the staging buffer.
  bool sums_in_output() const { return !scatter_only() && !transformed_ && (!cuts_scatter_reduce() || abandons_sends_); }
  // A reduce-scatter's sums go to the caller's block (from its shard's begin on), unless it is in
  // place: the block overlaps the input other ranks' shards are sent (and resent) from, so they go
  // to staging and are copied into the block at the end (finish_reduce_scatter).
  std::byte* sums() const {
    if (scatter_only()) return in_place() ? staged() : output();
    return sums_in_output() ? output() : staged();
  }
  std::uint64_t sums_origin() const { return scatter_only() && !in_place() ? s_.layout.shard_begin(s_.rank) : 0; }
  // Whether a send to some peer still references its buffers.
  bool any_send_in_flight() const {
    for (int p = 0; p < s_.ranks; ++p)
      if (p != s_.rank && transport_.sends_in_flight(p) != 0) return true;
    return false;
  }
  void replay_early();
  Status run_scatter_reduce(Clock::time_point scatter_start);
  Status run_all_gather(Clock::time_point gather_start, Clock::time_point gather_deadline);
  PhaseDeadlines budget() const;
  Status send_scatter();
  Status send(int peer, MessageKind kind, const Extent& extent, std::uint16_t flags, const std::byte* base);
  // A header of this call from this rank (no extent, flags or stamps yet).
  WireHeader header_of(MessageKind kind) const;
  // Any message of this call with this rank's stamps: encoded into the next header slot, sent.
  Status post(int peer, Lane lane, MessageKind kind, std::uint16_t flags, std::uint64_t offset, std::uint32_t length,
              std::span<const std::byte> payload);
  // Runs one phase until `complete`, its deadline, or (once every sender's last slice is in) a
  // short grace fixed at that moment.
  template <typename Complete, typename SendsToMe>
  Status run_phase(std::size_t phase, Clock::time_point phase_deadline, Complete&& complete, SendsToMe&& sends_to_me);
  // Hands everything the transport already holds to the call; true when anything came.
  bool drain_arrived(std::size_t phase);
  // At a phase's deadline (call/hold.cpp): until when it keeps waiting (now or earlier: it
  // closes) and the rule that holds it (late or entry: data a late or resumed peer still owes).
  // The phase stretches at most stretch_limit past `stretch_from`. `lost`: nothing missing can
  // come any more (lost_for_good).
  struct Hold {
    Clock::time_point until;
    PhaseHold why;
  };
  Hold keep_waiting_until(std::size_t phase, Clock::time_point stretch_from, bool last_slices_in, bool lost) const;
  // Why a scatter-reduce closed without every contribution (debug log): the senders that still
  // owed, how long after the deadline and after the last arrival.
  void log_scatter_cut(Clock::time_point scatter_start) const;
  void reduce_ready();
  void reduce(std::uint32_t chunk);
  void on_scatter_chunk(const Inbound& in, const InboundMessage& message);
  void on_gather_chunk(const Inbound& in, const InboundMessage& message);
  void on_missing_list(const Inbound& in, const InboundMessage& message);
  // Resends (tar/resend.hpp): this call asks for what its phases lost, over a transport that loses
  // data (not in fault injection: a discarded chunk is meant never to come); it answers while
  // what it would send again is still as it was sent.
  // (Both decided once per call: Resends::begin gets no rounds otherwise.)
  bool asks_resends() const { return bounded() && s_.resends.rounds() > 0; }
  bool serves_resends() const { return asks_resends() && serving_resends_; }
  void ask_for_missing(std::size_t phase);
  // Over a transport that loses data, once every sender's last slices of a phase are in: whether
  // what the phase still lacks is lost for good (every round asked, and its answers' wait over,
  // a stall's end included), not late.
  bool lost_for_good(std::size_t phase, Clock::duration resend_wait) const;
  void on_resend_request(const Inbound& in, const InboundMessage& message);
  // Bounded calls: the ranks agree on the chunks every rank fills (tar/fill_agreement.hpp).
  bool agree_on_fill();
  // What this call's lists carry besides: the loss window's figures, at the call that closes a
  // window, where its lists are exchanged until every rank has them (deadlines/agreements.hpp).
  std::span<const std::byte> figures_rider() const;
  // The flags of this rank's list pieces: `flags`, and whether they carry the figures.
  std::uint16_t list_flags(std::uint16_t flags) const {
    return static_cast<std::uint16_t>(flags | (s_.fill.carries_riders() ? WireHeader::kFlagFigures : 0));
  }
  // Waits for every peer's list until `until`, longer for a peer that stalled; true when all came.
  bool wait_for_lists(Clock::time_point until);
  // This rank's list (with `flags`) to a peer; `copies` of it to every peer.
  void send_list(int peer, std::uint16_t flags);
  void send_list_to_all(int copies, std::uint16_t flags);
  // Calls made exact by resends (call/exactness.cpp): whether the lists that came decide if
  // the call was exact everywhere, and the answer once they do.
  bool exactness_known() const;
  bool exact_everywhere() const;
  // Lists that may be lost (call/list_exchange.cpp): whether this rank has what its decision
  // needs; the exchange until every rank has (true), or until this rank fails the call (false).
  bool list_known() const;
  bool exchange_lists();
  // Once this rank knew and left, its list answers a peer still in that call that asks for it
  // again (its word that it knew was lost), from the next call.
  void remember_list();
  void answer_late_ask(const WireHeader& ask);
  static constexpr int kDecidedCopies = 3;
  // A wait that ends this much past its time: this rank was stopped meanwhile.
  static constexpr double kStoppedUs = 100e3;
  // Rounds of asking, and answers to one peer, per call at most (each a list sent to a peer).
  static constexpr int kMostAsks = 32;
  void log_incomplete_fill(Clock::time_point waited_from) const;
  Status finish_sends(Clock::time_point phase_deadline);
  // A reduce-scatter's end: each owner tells its peers once its shard is closed, and stays until
  // every peer has said so (a peer's notice ends the wait), answering requests for lost chunks
  // meanwhile. A bounded call over a transport that may lose data says so in its list and
  // exchanges the lists as a bounded allreduce does (exchange_lists): it leaves succeeded only
  // once it heard every peer's word, or fails as every rank does. A probe there waits only until
  // no peer could still be in its phase, and what is still queued then for a peer that never
  // said so is left (finish_sends).
  Status finish_reduce_scatter();
  void teach_deadlines(Clock::time_point scatter_start, Clock::time_point gather_start);
  CallStats fail(Status status);
  // Fails the call before it began on request_.failed_here: the peers hear of it (the notice
  // names nobody) or wait out their own deadlines, and fail the same call.
  CallStats give_up();
  // What this rank still waits for from each peer, for the failure agreement.
  void record_failure_view();
  void notify_failure(const std::vector<int>& ranks);
  static constexpr int kFailureCopies = 4;
  // A rank that gave up on its own over a transport that may lose the notice sends it again
  // while a peer may still wait for its word, at gaps doubling from the first to the most.
  void repeat_notice();
  static constexpr double kNoticeRepeatFirstUs = 2e3;
  static constexpr double kNoticeRepeatMostUs = 50e3;
  void on_call_failed(const Inbound& in, const InboundMessage& message);
  // At the call's end: no send may read the caller's input or output after it returns.
  void release_caller_buffers();
  // How long release_caller_buffers waits for sends a transport has handed on but not completed (they
  // complete without the peer: a provider's own queue).
  static constexpr double kReleaseWaitUs = 100e3;
  std::byte* gather_target() const { return transformed_ ? staged() : output(); }
  // Every peer has what it needs from this rank (it said so, or nothing is queued for it) and,
  // over a transport that cannot drop its queue, nothing this rank queued for it is left.
  bool peers_served() const;
  // The first message of this call from a peer: it has entered the call.
  void note_heard(std::uint32_t source, Clock::time_point arrived);
  // What classify() needs to know of the call in progress (or the last one).
  CallView view() const;
  // Until when what a phase still lacks is late rather than lost (min() when it may be lost):
  // over a transport that delivers everything, or while a peer nothing of this call came from
  // has not entered it yet (a checkpoint, an evaluation, a descheduled process), the hard cap;
  // after a late entry, as long as that peer's phases may stretch. Then a phase that would lose
  // more than this rank's share of the loss budget waits; a phase held for a peer's entry counts
  // its deadline from that arrival.
  Clock::time_point missing_late_until() const;
  // When every peer's phases have closed at the latest, from the last peer's entry.
  Clock::time_point peers_close_by(Clock::time_point last_entry) const;
  // Datagram calls: a peer stalled (descheduled, stopped) sends nothing, not even heartbeats; one
  // behind a lossy path still gets some through. A stalled peer's data is late, not lost.
  bool beats() const { return heartbeat_ != Clock::duration::zero(); }
  // Sends a heartbeat to each peer this rank has sent no control message for a while, when one is due.
  void beat();
  // Once per bounded call, after its budget is known: the watch on this rank's own stalls (every
  // transport); over datagrams heartbeats, silence and stall wait too.
  void start_liveness();
  // Every bounded call watches this rank's own stalls: a stopped rank reads nothing, so the
  // quiet it finds when it runs again is its own, not the network's.
  bool watches_own_stall() const { return running_tick_ != Clock::duration::zero(); }
  // A wait's poll: counts a gap in this rank's own waits as a stall (before the poll, and across
  // it: a stop inside it shows only once it returns), sends the heartbeats due, and wakes for the
  // next ones and to look at its own running.
  Status poll_alive(Clock::time_point until, const std::function<void(const InboundMessage&)>& handler);
  // The next heartbeat pass (max() when this call sends none).
  Clock::time_point next_beat() const { return beats() ? next_beat_ : Clock::time_point::max(); }
  // The latest a wait wakes to see whether this rank runs (max() when it is not watched).
  Clock::time_point next_look() const { return watches_own_stall() ? last_ran_ + running_tick_ : Clock::time_point::max(); }
  // This rank's waits wake at least every running tick (a heartbeat's interval): a gap longer
  // than a silence between two of them was a stall of this rank (descheduled, stopped), which its
  // phases may stretch by, as by a peer's, and whose end its quiet gap counts from (resumed_at_).
  void note_running();
  void note_stall(Clock::time_point from, Clock::time_point to);
  // Any message from a peer: it runs. One that was silent past silence_ was stalled until now.
  void note_alive(std::uint32_t source, Clock::time_point arrived);
  // Until when a peer still in this call (entered, no list or "done" from it yet) is waited for
  // because nothing came from it lately: a silence later when it is stalled (quiet for
  // silence_, but not yet for stall_wait_), when its silence would be complete when its
  // heartbeats are overdue; min() when every such peer was heard lately.
  // In a phase (`phase` set), a peer that still owes this rank data counts even once its list or
  // "done" came: over datagrams its list leaves at once, while its data may still wait in its
  // queue behind its flow window.
  Clock::time_point quiet_peers_until(Clock::time_point now, std::optional<std::size_t> phase = std::nullopt) const;
  static constexpr int kOverdueBeats = 2;
  // Whether a peer still owes this rank data in a phase (a contribution to an open chunk of its
  // shard; a chunk of the peer's own shard).
  bool owes(std::size_t phase, int peer) const;
  // The latest moment a peer that still owes this rank data in the phase was heard again after a
  // stall (time_point{} when none was).
  Clock::time_point owing_peer_back_at(std::size_t phase) const;
  // Going on now would lose more than this rank's share of the loss budget (a call that loses
  // more than the budget is not a result).
  bool over_budget_share(double loss) const;
  // The share of the call's entries lost if the phase closed now.
  double loss_if_closed(std::size_t phase) const;

  EngineState& s_;
  TransportPath& path_;
  Transport& transport_;
  const TarRequest request_;
  const PhaseDeadlines* probe_;
  CallStats stats_;
  const Clock::time_point start_;
  const Clock::time_point hard_deadline_;
  StagingBuffer* staging_ = nullptr;
  const std::byte* scatter_source_ = nullptr;  // the caller's input, or a staged copy of it
  const std::byte* own_source_ = nullptr;      // where the reduce reads this rank's own shard
  const std::size_t element_bytes_;
  bool transformed_ = false;
  std::uint32_t last_slices_ = 1;
  bool abandons_sends_ = false;  // the transport's can_abandon_sends, read once per call
  bool cuts_scatter_ = false, cuts_gather_ = false;  // decide_cuts
  PhaseDeadlines budget_;
  Clock::time_point scatter_closed_{};
  Clock::time_point last_arrival_ = Clock::now();  // of any chunk of this call
  int unheard_ = 0;                     // peers nothing of this call came from yet
  Clock::time_point all_heard_at_{};    // when the last of them entered
  bool waited_for_entry_ = false;       // a phase was held for a peer that had not entered
  Clock::duration heartbeat_{};         // zero: no heartbeats (a transport that loses nothing)
  Clock::duration silence_{};
  Clock::duration stall_wait_{};
  Clock::time_point next_beat_{};
  Clock::duration running_tick_{};      // zero: this rank's own stalls are not watched
  Clock::time_point last_ran_{};        // this rank's last pass through a wait
  Clock::time_point resumed_at_{};      // the end of this rank's last own stall in this call
  std::byte* beat_header_ = nullptr;    // the staging header slot every heartbeat of the call sends
  // How long stalls (a peer silent past silence_, or a gap in this rank's own waits) held this
  // call, each moment counted once: phases may stretch by as much.
  Clock::duration stalled_{};
  Clock::time_point stall_counted_until_{};
  // Until the fill agreement may change the staged data (or the call ends without one).
  bool serving_resends_ = true;
  // This rank sent its list of missing chunks: to its peers that says it is done, too.
  bool sent_list_ = false;
  bool said_done_ = false;  // a reduce-scatter's owner told its peers its shard is closed
  int list_copies_ = 1;  // FillAgreement::copies for this call's transport
  int asks_ = 0;                    // rounds of asking so far
  std::vector<int> answers_;        // per peer: answers sent
};

}  // namespace optireduce
