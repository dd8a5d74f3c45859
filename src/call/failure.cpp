// A call that fails: every rank must fail the same call and name the same ranks. The rank that
// gives up tells its peers (call_failed), records what it still waited for from whom (the
// engine exchanges that over the bootstrap), and leaves nothing writing into the caller's buffer.
#include <algorithm>
#include <chrono>
#include <string>

#include "optireduce/byte_order.hpp"
#include "optireduce/engine/clock_us.hpp"
#include "optireduce/engine/log.hpp"
#include "optireduce/engine/call/tar_call.hpp"
#include "optireduce/engine/tar/schedule.hpp"

namespace optireduce {

void TarCall::on_call_failed(const Inbound& in, const InboundMessage& message) {
  if (!s_.peer_failure.ok()) return;
  std::vector<std::byte> list(std::min<std::size_t>(message.payload_size, 4 * static_cast<std::size_t>(s_.ranks)));
  if (list.size() != message.payload_size || !message.copy_payload(list)) return;
  std::string ranks;
  for (std::size_t at = 0; at + 4 <= list.size(); at += 4)
    ranks += (ranks.empty() ? "" : ", ") + std::to_string(get_le<std::uint32_t>(list.data() + at));
  s_.peer_failure = PeerError("rank " + std::to_string(in.header.source) + " gave up on call " + std::to_string(in.header.epoch) +
                              (ranks.empty() ? std::string() : ": ranks " + ranks + " did not answer"));
}

void TarCall::record_failure_view() {
  using FailureView = EngineState::FailureView;
  // A peer that owes a scatter-reduce contribution never started the call (or its data never
  // came); one that owes only all-gather chunks or confirmation may itself be waiting for others.
  auto& view = s_.failure_view;
  view.assign(static_cast<std::size_t>(s_.ranks), FailureView::answered);
  // A rank that failed on a peer's notice did not wait out its watchdog: it names nobody.
  if (!s_.peer_failure.ok()) return;
  for (int p = 0; p < s_.ranks; ++p) {
    if (p == s_.rank) continue;
    if (!staging_ || (s_.in_call && s_.scatter.waiting_for(p))) {
      view[p] = FailureView::never_started;
    } else if ((s_.in_call && !s_.gather.shard_complete(p)) ||
               (!s_.done_from.empty() && !s_.done_from[p] && transport_.sends_in_flight(p) != 0)) {
      view[p] = FailureView::did_not_finish;
    }
  }
}

void TarCall::notify_failure(const std::vector<int>& ranks) {
  // Kept in the engine's state: the sends may outlive this call.
  auto& notice = s_.failure_notice;
  notice.payload.assign(4 * ranks.size(), std::byte{0});
  for (std::size_t i = 0; i < ranks.size(); ++i) put_le<std::uint32_t>(notice.payload.data() + 4 * i, static_cast<std::uint32_t>(ranks[i]));
  WireHeader h;
  h.kind = MessageKind::call_failed;
  h.source = static_cast<std::uint32_t>(s_.rank);
  h.comm_id = s_.comm_id;
  h.epoch = staging_ ? s_.epoch : s_.epoch + 1;  // the call this rank is in, or was about to begin
  h.total = request_.count;
  encode(h, notice.header);
  // Over a transport that may lose it, in several copies: a peer that waits for this rank's word
  // at the end of the call (call/list_exchange.cpp) must hear of the failure to fail the same call.
  const int copies = transport_.traits().reliable ? 1 : kFailureCopies;
  for (int copy = 0; copy < copies; ++copy)
    for (int k = 1; k < s_.ranks; ++k) (void)transport_.send(rotation_peer(s_.rank, s_.ranks, k), Lane::control, notice.header, notice.payload);
  // Push the notices out for a moment: the peers may be waiting for something from this rank.
  auto handler = [](const InboundMessage&) {};
  const auto until = Clock::now() + std::chrono::milliseconds(200);
  while (any_send_in_flight() && Clock::now() < until) (void)transport_.poll(until, handler);
}

void TarCall::repeat_notice() {
  // A peer that knows what it needed waits for this rank's word until this rank's hard deadline
  // and a notice wait past it, later by as much as the ranks entered apart (call/list_exchange.cpp).
  // The copies sent at once are lost together where a direction is down just then: the notice
  // goes again across that wait, until every peer has said it failed the call too.
  const auto spread = unheard_ == 0 && all_heard_at_ > start_ ? all_heard_at_ - start_ : Clock::duration::zero();
  const auto until = std::max(Clock::now(), hard_deadline_) + 2 * spread + us_duration(DeadlineController::notice_wait_us());
  std::vector<char> failed(static_cast<std::size_t>(s_.ranks), 0);
  failed[static_cast<std::size_t>(s_.rank)] = 1;
  // A notice of this call, or of a later one from a peer that went on: that peer failed too.
  auto handler = [&](const InboundMessage& m) {
    const Inbound in = classify(m, view());
    if (in.header.kind == MessageKind::call_failed && (in.kind == InboundKind::call_failed || in.kind == InboundKind::early))
      failed[in.header.source] = 1;
  };
  auto every_peer_failed = [&] { return std::all_of(failed.begin(), failed.end(), [](char f) { return f != 0; }); };
  auto gap = us_duration(kNoticeRepeatFirstUs);
  auto next = Clock::now() + gap;
  while (!every_peer_failed() && Clock::now() < until) {
    if (Clock::now() >= next) {
      for (int k = 1; k < s_.ranks; ++k) {
        const int peer = rotation_peer(s_.rank, s_.ranks, k);
        if (!failed[static_cast<std::size_t>(peer)])
          (void)transport_.send(peer, Lane::control, s_.failure_notice.header, s_.failure_notice.payload);
      }
      gap = std::min(2 * gap, us_duration(kNoticeRepeatMostUs));
      next = Clock::now() + gap;
    }
    (void)transport_.poll(std::min(next, until), handler);
  }
}

CallStats TarCall::give_up() {
  // Nothing was sent or staged: this rank waited for nobody, and says so.
  s_.failure_view.assign(static_cast<std::size_t>(s_.ranks), EngineState::FailureView::answered);
  // Over a transport that may lose the notice, again until every peer failed too (repeat_notice):
  // a peer that never hears of it waits for this rank's data until its hard deadline, cuts it,
  // and leaves the call succeeded.
  if (s_.peer_failure.ok()) {
    notify_failure({});
    if (!transport_.traits().reliable) repeat_notice();
  }
  stats_.status = request_.failed_here;
  stats_.latency_us = us_since(start_);
  return stats_;
}

CallStats TarCall::fail(Status status) {
  // A rank that gives up on its own (not on a peer's notice) may be stopped just then, before
  // its notice leaves (OPTIREDUCE_FAULT_STALL): its peers must still fail the same call.
  if (s_.peer_failure.ok()) s_.faults.maybe_stall_at_give_up();
  if (transformed_) s_.hadamard.quiesce();  // nothing may write into the caller's buffer after this
  release_caller_buffers();                  // nor read it
  record_failure_view();
  if (s_.peer_failure.ok()) {
    std::vector<int> silent;
    for (int p = 0; p < s_.ranks; ++p)
      if (s_.failure_view[p] == EngineState::FailureView::never_started) silent.push_back(p);
    notify_failure(silent);
    if (staging_ && !transport_.traits().reliable) repeat_notice();
  } else if (!transport_.traits().reliable) {
    // Passed on: a peer the first notice did not reach hears it from here, and the rank that
    // gave up hears that this one failed the call too.
    notify_failure({});
  }
  s_.in_call = false;
  if (log_enabled(LogLevel::debug)) {
    std::string flight;
    for (int p = 0; p < s_.ranks; ++p)
      if (p != s_.rank) flight += " " + std::to_string(p) + ":" + std::to_string(transport_.sends_in_flight(p));
    const TransportCounters c = transport_.counters();
    std::string waiting;
    for (int p = 0; p < s_.ranks; ++p)
      if (p != s_.rank && s_.in_call && (s_.scatter.waiting_for(p) || !s_.gather.shard_complete(p))) waiting += " " + std::to_string(p);
    OR_LOG(debug, "at the failure: sends in flight per peer%s; %llu messages sent, %llu received; data still owed by%s",
           flight.c_str(), static_cast<unsigned long long>(c.messages_sent), static_cast<unsigned long long>(c.messages_received),
           waiting.c_str());
  }
  OR_LOG(debug,
         "allreduce of %llu floats (call %llu, %s) failed: %s; missing %llu gathered chunks, %s own shard, "
         "%llu messages rejected here and %llu by the transport, early store %zu",
         static_cast<unsigned long long>(request_.count), static_cast<unsigned long long>(s_.epoch), to_string(stats_.kind),
         status.text().c_str(), static_cast<unsigned long long>(s_.gather.remaining()),
         s_.scatter.complete() ? "reduced" : "incomplete", static_cast<unsigned long long>(s_.rejects.total()),
         static_cast<unsigned long long>(transport_.counters().rejected()), s_.early.size());
  stats_.status = std::move(status);
  stats_.latency_us = us_since(start_);
  return stats_;
}

}  // namespace optireduce
