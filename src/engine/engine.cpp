#include "optireduce/engine/engine/engine.hpp"

#include <algorithm>
#include <climits>
#include <cstring>
#include <random>

#include "optireduce/byte_order.hpp"
#include "optireduce/elements/convert.hpp"
#include "optireduce/engine/clock_us.hpp"
#include "optireduce/engine/log.hpp"
#include "optireduce/engine/tar/schedule.hpp"
#include "optireduce/engine/engine/transport_loader.hpp"

namespace optireduce {

const char* to_string(TransportKind kind) {
  switch (kind) {
    case TransportKind::automatic: return "auto";
    case TransportKind::ucx: return "ucx";
    case TransportKind::udp: return "udp";
    case TransportKind::ofi: return "ofi";
  }
  return "?";
}

Engine::Engine(int rank, int ranks, std::uint64_t comm_id, Paths paths, std::unique_ptr<Bootstrap> bootstrap,
               const EngineOptions& options)
    : state_(rank, ranks, comm_id, options, std::move(bootstrap), bounded_of(paths)->transport->traits().reliable),
      paths_(std::move(paths)) {}

Engine::~Engine() = default;

TransportCounters Engine::transport_counters() const {
  TransportCounters sum;
  for (const auto* path : {paths_.exact.get(), paths_.bounded.get()}) {
    if (!path) continue;
    sum += path->transport->counters();
  }
  if (tiers_) sum += tiers_->transport_counters();
  return sum;
}

std::string Engine::transport_description() const {
  if (!paths_.exact) return paths_.bounded->transport->describe();
  if (!paths_.bounded) return paths_.exact->transport->describe();
  return "exact: " + paths_.exact->transport->describe() + "; bounded: " + paths_.bounded->transport->describe();
}

std::size_t Engine::buffer_bytes() const {
  std::size_t staged = 0;
  for (const auto* path : {paths_.exact.get(), paths_.bounded.get()})
    if (path) staged += path->staging.bytes();
  return staged + state_.scatter.buffer_bytes() + state_.hadamard.buffer_bytes() + state_.probe_output.capacity() * sizeof(float) +
         (tiers_ ? tiers_->buffer_bytes() : 0);
}

CallKind Engine::choose_kind(unsigned cls) const {
  // Every input here is the same on every rank: the options, the call sequence, the number of
  // calibration calls per size class, and what the agreement rounds decided.
  if (state_.deadlines.calibrating(cls)) return CallKind::calibration;
  if (state_.loss_budget.exact_until(state_.calls + 1)) return CallKind::fallback;
  return CallKind::bounded;
}

CallStats Engine::allreduce(const void* input, void* output, std::uint64_t count, ElementFormat format, bool allow_bounded) {
  TarRequest call;
  call.input = input;
  call.output = output;
  call.count = count;
  call.shape = {Collective::allreduce, format};
  return run_call(call, allow_bounded);
}

CallStats Engine::reduce_scatter(const void* input, void* output, std::span<const std::uint64_t> counts, ElementFormat format,
                                 bool allow_bounded) {
  CallStats stats = scatter_call(input, output, counts, format, allow_bounded, {});
  // A rank that owns an empty block receives nothing but its peers' words that their blocks are
  // closed, which over datagrams it stops waiting for at its agreement window: it could run
  // calls ahead of the others further than the early store keeps their data. Where some
  // block is empty (the counts are the same on every rank), the ranks leave the call together;
  // in three stages the host stages hold them (hierarchy/host_tiers.hpp: every host receives).
  const bool some_block_empty = std::find(counts.begin(), counts.end(), 0) != counts.end();
  if (stats.ok() && some_block_empty && state_.ranks > 1 && !stats.stages.hierarchical) state_.bootstrap->allgather({});
  return stats;
}

CallStats Engine::reduce_scatter(const void* input, void* output, std::span<const std::uint64_t> counts, ElementFormat format,
                                 bool bounded, const Status& failed_here) {
  return scatter_call(input, output, counts, format, bounded, failed_here);
}

CallStats Engine::scatter_call(const void* input, void* output, std::span<const std::uint64_t> counts, ElementFormat format,
                               bool allow_bounded, const Status& failed_here) {
  if (counts.size() != static_cast<std::size_t>(state_.ranks)) {
    CallStats stats;
    stats.status = Invalid("a reduce-scatter takes one count per rank: " + std::to_string(counts.size()) + " counts for " +
                           std::to_string(state_.ranks) + " ranks");
    return stats;
  }
  TarRequest call;
  call.input = input;
  call.output = output;
  for (std::uint64_t c : counts) call.count += c;
  call.shape = {Collective::reduce_scatter, format};
  call.blocks = counts;
  call.failed_here = failed_here;
  return run_call(call, allow_bounded);
}

CallStats Engine::allreduce(const void* input, void* output, std::uint64_t count, ElementFormat format, bool bounded,
                            const Status& failed_here) {
  TarRequest call;
  call.input = input;
  call.output = output;
  call.count = count;
  call.shape = {Collective::allreduce, format};
  call.failed_here = failed_here;
  return run_call(call, bounded);
}

CallStats Engine::run_call(TarRequest call, bool allow_bounded) {
  const auto start = Clock::now();
  CallStats stats;
  stats.shape = call.shape;
  stats.entries = call.shape.scatter_only() ? call.blocks[static_cast<std::size_t>(state_.rank)] : call.count;
  if (broken_) {
    stats.status = PeerError("an earlier call on this communicator failed");
    return stats;
  }
  if (tiers_ && call.shape.collective == Collective::allreduce && call.count > 0) {
    // Three stages, for every format: each slice's engine decides its own kind and agrees its own
    // failures, and every rank of every host learns of any (hierarchy/host_tiers.hpp). An empty
    // call has no slice to carry a host's failure to the others: it stays flat.
    stats.sequence = ++state_.calls;
    tiers_->note_list_left(list_left());
    stats = tiers_->allreduce(call.input, call.output, call.count, call.shape.format, allow_bounded, std::move(stats), start);
    note_list_left(tiers_->list_left());
    state_.largest_call_bytes = std::max<std::size_t>(state_.largest_call_bytes, call.count * call.shape.element_bytes());
  } else if (tiers_ && call.shape.scatter_only() && call.count > 0 && tiers_->takes_reduce_scatter(call.blocks)) {
    // The same, a reduce-scatter (hierarchy/host_reduce_scatter.cpp): every host holds a part,
    // so every host hears of a failure.
    stats.sequence = ++state_.calls;
    tiers_->note_list_left(list_left());
    stats = tiers_->reduce_scatter(call.input, call.output, call.blocks, call.shape.format, allow_bounded, std::move(stats), start);
    note_list_left(tiers_->list_left());
    state_.largest_call_bytes = std::max<std::size_t>(state_.largest_call_bytes, call.count * call.shape.element_bytes());
  } else {
    stats = run_flat(call, allow_bounded, std::move(stats), start);
  }
  state_.agreed.injected_drops = state_.faults.injected_drops();
  state_.agreed.resend_requests = state_.resends.requests_sent;
  state_.agreed.resend_chunks_asked = state_.resends.chunks_asked;
  state_.agreed.resent_chunks = state_.resends.chunks_resent;
  if (!stats.ok()) broken_ = true;
  state_.last_call = stats;
  return stats;
}

CallStats Engine::run_flat(TarRequest& call, bool allow_bounded, CallStats stats, Clock::time_point start) {
  const unsigned cls = call.size_class = call_class(call.count * call.shape.element_bytes(), call.shape.index());
  // Over shared memory nothing is lost to a network: a bounded communicator's calls run exactly
  // there, over the faster of the engine and the MPI.
  stats.kind = allow_bounded && !step_aside_.eligible() ? choose_kind(cls) : CallKind::exact;
  stats.sequence = ++state_.calls;
  // The path of the call, in one place: the job's MPI where it measured faster (one host, shared
  // memory: deadlines/step_aside.hpp; a float32 allreduce, what the MPI's own does), and while that
  // is measured; bounded calls over the bounded transport; exact ones over the exact transport
  // (then, while calibrating or after a fallback, a probe of the bounded transport when it is
  // another one), or over the bootstrap when there is none.
  const bool steps_aside = call.shape == CallShape{};
  const StepAside::Path aside = steps_aside ? step_aside_.next(cls) : StepAside::Path::engine;
  if (aside == StepAside::Path::mpi) stats.kind = CallKind::mpi;
  if (aside == StepAside::Path::mpi || aside == StepAside::Path::mpi_sample) {
    stats = exact_over_bootstrap(call, std::move(stats), start);
  } else if (stats.kind == CallKind::bounded) {
    stats = run_tar(*bounded_path(), call, std::move(stats), start);
  } else if (stats.kind == CallKind::calibration && calibrates_over_datagrams(call)) {
    stats = calibrate_over_datagrams(call, std::move(stats), start);
  } else if (paths_.exact) {
    const bool probe_after = stats.kind != CallKind::exact && paths_.bounded != nullptr;
    TarRequest exact = call;
    exact.teaches = !probe_after;
    stats = run_tar(*paths_.exact, exact, std::move(stats), start);
    if (stats.ok() && probe_after) stats = probe(call, std::move(stats), stats.latency_us);
  } else {
    stats = exact_over_bootstrap(call, std::move(stats), start);
    if (stats.ok() && stats.kind != CallKind::exact) stats = probe(call, std::move(stats), stats.latency_us);
  }
  if (!stats.ok() && stats.transport != "mpi") stats.status = agree_on_failure(stats.status, stats.kind);
  if (stats.ok() && steps_aside) step_aside_.record(cls, aside, stats.latency_us, *state_.bootstrap);
  if (stats.kind == CallKind::bounded && stats.ok()) {
    // Where this call's lists carried the loss window's figures (TarCall::figures_rider), every
    // rank's came with them: the call succeeded.
    const bool carried = stats.fill_agreed && state_.fill.carries_riders();
    state_.loss_budget.after_bounded_call(stats, state_.calls,
                                          carried ? state_.fill.riders() : std::span<const std::vector<std::byte>>{},
                                          *state_.bootstrap, state_.agreed);
  }
  return stats;
}

Status Engine::agree_on_failure(const Status& mine, CallKind kind) {
  using FailureView = EngineState::FailureView;
  // Blob: [when this rank entered the call, ns][what it waited for from each rank].
  const auto ranks = static_cast<std::size_t>(state_.ranks);
  std::vector<std::byte> blob(8 + ranks, std::byte{0});
  put_le<std::int64_t>(blob.data(), state_.call_entered_ns);
  for (std::size_t p = 0; p < state_.failure_view.size() && p < ranks; ++p) blob[8 + p] = static_cast<std::byte>(state_.failure_view[p]);
  const auto views = state_.bootstrap->allgather(blob);
  // A bounded call's wait ends at its hard deadline (OPTIREDUCE_TIMEOUT_MS), any other's at the watchdog.
  const bool bounded = kind == CallKind::bounded;
  const std::chrono::milliseconds limit = bounded ? state_.options.timeout : state_.options.watchdog;
  const std::int64_t limit_ns = std::chrono::duration_cast<std::chrono::nanoseconds>(limit).count();
  std::int64_t first = INT64_MAX;
  for (const auto& v : views)
    if (v.size() == blob.size()) first = std::min(first, get_le<std::int64_t>(v.data()));
  // The ranks that were not there when the first rank's wait ran out; else those some rank
  // waited for to start; else those it waited for to finish.
  std::string names[3];
  for (std::size_t p = 0; p < ranks && p < views.size(); ++p) {
    if (views[p].size() == blob.size() && get_le<std::int64_t>(views[p].data()) > first + limit_ns)
      names[0] += (names[0].empty() ? "" : ", ") + std::to_string(p);
    bool never = false, unfinished = false;
    for (const auto& v : views) {
      if (v.size() != blob.size()) continue;
      never = never || v[8 + p] == static_cast<std::byte>(FailureView::never_started);
      unfinished = unfinished || v[8 + p] == static_cast<std::byte>(FailureView::did_not_finish);
    }
    if (never) names[1] += (names[1].empty() ? "" : ", ") + std::to_string(p);
    if (unfinished) names[2] += (names[2].empty() ? "" : ", ") + std::to_string(p);
  }
  const std::string& silent = !names[0].empty() ? names[0] : !names[1].empty() ? names[1] : names[2];
  if (silent.empty()) return mine;
  const auto ms = std::to_string(limit.count());
  return Timeout("ranks " + silent + " did not answer within " + ms + " ms (" + (bounded ? "OPTIREDUCE_TIMEOUT_MS=" : "OPTIREDUCE_WATCHDOG_MS=") + ms + ")");
}

CallStats Engine::run_tar(TransportPath& path, const TarRequest& request, CallStats stats, Clock::time_point start) {
  TarCall call(state_, path, request, std::move(stats), start);
  return call.run();
}

void Engine::drain_bounded_sends() {
  // Datagrams of an earlier call still queued here would sit unsent while this rank blocks in
  // the job's MPI, and a peer waiting for them would wait out its deadline: push them out first,
  // for a short while at most. What arrives meanwhile is filed as a call that has not begun.
  TransportPath& path = *bounded_path();
  Transport& transport = *path.transport;
  auto drained = [&] {
    for (int p = 0; p < state_.ranks; ++p)
      if (p != state_.rank && transport.sends_in_flight(p) != 0) return false;
    return true;
  };
  if (drained()) return;  // the common case, and a call that steps aside pays nothing here
  TarCall idle(state_, path, {}, {}, Clock::now());
  const auto until = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                        std::chrono::duration<double, std::micro>(DeadlineController::drain_before_exact_us()));
  auto handler = [&](const InboundMessage& m) { idle.handle(m); };
  while (!drained() && Clock::now() < until) (void)transport.poll(until, handler);
  transport.abandon_queued_sends();
}

CallStats Engine::exact_over_bootstrap(const TarRequest& call, CallStats stats, Clock::time_point start) {
  drain_bounded_sends();
  stats.transport = "mpi";
  bool ok = true;
  // A slice's engine sums one more element: whether some rank's caller failed the call.
  const bool flagged = failure_flag_over_bootstrap_;
  if (call.shape == CallShape{} && !flagged) {
    ok = state_.bootstrap->allreduce_sum(static_cast<const float*>(call.input), static_cast<float*>(call.output), call.count);
  } else {
    // The bootstrap sums float32 over the whole buffer: 16-bit elements are widened into it, and
    // what this rank returns (a reduce-scatter's block) is rounded back once.
    std::vector<float> sums(call.count + (flagged ? 1 : 0));
    const ElementFormat format = call.shape.format;
    if (format == ElementFormat::float32) std::memcpy(sums.data(), call.input, call.count * sizeof(float));
    else widen(format, call.input, sums.data(), call.count);
    if (flagged) sums[call.count] = call.failed_here.ok() ? 0.0f : 1.0f;
    ok = state_.bootstrap->allreduce_sum(sums.data(), sums.data(), sums.size());
    if (ok && flagged && sums[call.count] != 0.0f) {
      stats.latency_us = us_since(start);
      stats.status = call.failed_here.ok() ? PeerError("another rank's part of the call failed before it") : call.failed_here;
      return stats;
    }
    std::uint64_t from = 0, count = call.count;
    if (call.shape.scatter_only()) {
      for (int p = 0; p < state_.rank; ++p) from += call.blocks[static_cast<std::size_t>(p)];
      count = call.blocks[static_cast<std::size_t>(state_.rank)];
    }
    if (ok && format == ElementFormat::float32) std::memcpy(call.output, sums.data() + from, count * sizeof(float));
    else if (ok) narrow(format, sums.data() + from, call.output, count);
  }
  stats.latency_us = us_since(start);
  if (!ok) {
    stats.status = PeerError("the exact allreduce over the job's MPI failed");
    return stats;
  }
  if (!call.failed_here.ok()) {  // an engine without the flag: this rank at least returns no garbage
    stats.status = call.failed_here;
    return stats;
  }
  stats.phase_us = {stats.latency_us, 0.0};
  return stats;
}

CallStats Engine::probe(const TarRequest& call, CallStats stats, double exact_us) {
  // The result is exact already. Now time the bounded transport on the same data, so that
  // bounded calls get the deadlines of the network they will run on, not those of the exact path.
  // (A reduce-scatter's output is its block alone: its probe runs in place on the engine's buffer,
  // whose values do not change what is timed.)
  state_.deadlines.note_exact_call(call.size_class, exact_us);
  PhaseDeadlines budget;
  budget.us.fill(state_.deadlines.probe_budget_us(call.size_class));
  TarRequest run = call;
  run.probe = &budget;
  run.output = probe_buffer(call.count * call.shape.element_bytes());
  run.input = call.shape.scatter_only() ? run.output : call.output;
  const CallStats probed = run_tar(*bounded_path(), run, stats, Clock::now());
  if (!probed.ok()) stats.status = probed.status;
  else teach_calibration(call, state_.my_estimate_us, probed);
  stats.latency_us += probed.latency_us;
  return stats;
}

void* Engine::probe_buffer(std::uint64_t bytes) {
  const std::uint64_t floats = (bytes + sizeof(float) - 1) / sizeof(float);
  if (state_.probe_output.size() < floats) state_.probe_output.resize(floats);
  return state_.probe_output.data();
}

bool Engine::calibrates_over_datagrams(const TarRequest& call) const {
  // Over a bounded transport of its own that asks again for what it lost. The same answer on
  // every rank. An allreduce only: whether a run was exact everywhere is decided from the lists
  // of missing all-gather chunks that end it.
  return !call.shape.scatter_only() && paths_.bounded != nullptr && state_.options.resend_rounds > 0 &&
         !paths_.bounded->transport->traits().reliable;
}

CallStats Engine::calibrate_over_datagrams(const TarRequest& call, CallStats stats, Clock::time_point start) {
  // One run of the path bounded calls take, timed as a probe is; where every rank got everything
  // (lost datagrams asked for again) its result is exact and the call is done. Otherwise the call
  // runs again over the exact path, which over a lossy network waits out the retransmissions a
  // datagram path avoids. In place, the run writes elsewhere: the exact run needs the input.
  const std::uint64_t bytes = call.count * call.shape.element_bytes();
  void* target = call.input == call.output ? probe_buffer(bytes) : call.output;
  PhaseDeadlines budget;
  budget.us.fill(state_.deadlines.probe_budget_us(call.size_class));
  TarRequest run = call;
  run.output = target;
  run.probe = &budget;
  run.exact_by_resends = true;
  CallStats timed = run_tar(*bounded_path(), run, stats, start);
  if (!timed.ok()) return timed;
  // What it needed per phase (TarCall::teach_deadlines; a rerun overwrites it).
  const PhaseTimes needed = state_.my_estimate_us;
  const CallStats ran = timed;
  // Exact only where it is exact everywhere, which the run's ranks decided alike from their lists
  // of missing chunks (call/exactness.cpp): not over the job's MPI, which on a lossy network
  // rides the same lossy path over TCP.
  if (!timed.cut) {
    if (target != call.output) std::memcpy(call.output, target, bytes);
    timed.latency_us = us_since(start);
    timed.deadline_us = {};  // the run's budget bounded its wait, not its result
    state_.deadlines.note_exact_call(call.size_class, timed.latency_us);
    teach_calibration(call, needed, ran);
    return timed;
  }
  ++state_.agreed.calibration_reruns;
  drain_bounded_sends();  // what peers may still wait for goes out before this rank blocks
  const auto rerun_from = Clock::now();
  TarRequest exact = call;
  exact.teaches = false;
  // The rerun waits a watchdog for each peer from the latest moment that peer may enter it: a
  // peer whose word this rank never got stays in the run's exchange until its own wait ends. From
  // the call's start, a run that took most of the watchdog left the rerun too little of it: ranks
  // that entered first failed at their watchdog as the last one came, which had all it needed by
  // then and succeeded (docs/design.md, "Randomized fault schedules").
  exact.waits_from = rerun_from + TarCall::longest_exchange_lag(state_.options);
  stats = paths_.exact ? run_tar(*paths_.exact, exact, std::move(stats), start) : exact_over_bootstrap(call, std::move(stats), start);
  if (!stats.ok()) return stats;
  // The run teaches no more than a probe beside this exact call could have taken.
  state_.deadlines.note_exact_call(call.size_class, us_since(rerun_from));
  teach_calibration(call, needed, ran, state_.deadlines.probe_budget_us(call.size_class));
  return stats;
}

void Engine::teach_calibration(const TarRequest& call, const PhaseTimes& needed, const CallStats& run, double most_us) {
  // A run's phase times are its budget when anything was lost (probe_estimate_us).
  PhaseTimes taught;
  for (std::size_t p = 0; p < kTarPhases; ++p)
    taught[p] = std::min(DeadlineController::probe_estimate_us(needed[p], run.phase_us[p]), most_us);
  state_.record_calibration(call.size_class, taught, call.count * call.shape.element_bytes());
  if (run.kind == CallKind::calibration) learn_pace(call, run.latency_us);
}

void Engine::learn_pace(const TarRequest& call, double call_us) {
  // This rank's sends in all: its contributions to every other shard, and (an allreduce) its
  // shard to every peer.
  const double own = call.shape.scatter_only()
                         ? double(call.blocks[static_cast<std::size_t>(state_.rank)])
                         : double(ShardLayout(call.count, state_.ranks, state_.options.chunk_elems).shard_size(state_.rank));
  const double gathered = call.shape.scatter_only() ? 0.0 : own * (state_.ranks - 1);
  const double bytes = (double(call.count) - own + gathered) * double(call.shape.element_bytes());
  // The pace of the path bounded calls take, the fastest of the calibration's runs of it: the
  // exact calls may ride TCP, and one retransmission timeout there would throttle every bounded
  // call that follows.
  const double pace = state_.deadlines.pace_bytes_per_s(bytes, call_us);
  if (!state_.deadlines.calibrating(call.size_class)) bounded_path()->transport->suggest_pace(pace);
}

EngineState::EngineState(int rank_, int ranks_, std::uint64_t comm_id_, const EngineOptions& options_,
                         std::unique_ptr<Bootstrap> bootstrap_, bool bounded_reliable)
    : rank(rank_),
      ranks(ranks_),
      comm_id(comm_id_),
      options(options_),
      bootstrap(std::move(bootstrap_)),
      deadlines([&] {
        DeadlineOptions d;
        d.calibration_calls = options_.calibration_calls;
        d.cap_us = std::chrono::duration<double, std::micro>(options_.timeout).count();
        return d;
      }()),
      hadamard(options_.hadamard_block_log2, options_.hadamard_overlap && options_.hadamard != HadamardMode::off && ranks_ > 1),
      faults(options_.faults, rank_),
      loss_budget(options, rank_, ranks_, bounded_reliable) {
  send_order = shard_send_order(rank, ranks);
}

}  // namespace optireduce
