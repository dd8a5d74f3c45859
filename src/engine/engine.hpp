// One engine per communicator: its ranks, its transports, its buffers, its deadlines. Two
// operations, sums of float32, float16 or bfloat16 elements: an allreduce (the Transpose
// AllReduce) and a reduce-scatter (its first phase alone), exactly or within a deadline. It knows
// nothing of MPI: the bootstrap is what it needs of the job's own layer.
#pragma once

#include <algorithm>
#include <cstdint>
#include <limits>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "optireduce/engine/engine/bootstrap.hpp"
#include "optireduce/engine/report/call_stats.hpp"
#include "optireduce/engine/config/engine_options.hpp"
#include "optireduce/engine/engine/state.hpp"
#include "optireduce/engine/deadlines/step_aside.hpp"
#include "optireduce/engine/call/tar_call.hpp"
#include "optireduce/engine/engine/transport_path.hpp"
#include "optireduce/engine/hierarchy/host_tiers.hpp"
#include "optireduce/transport.hpp"

namespace optireduce {

class Engine {
 public:
  // Collective over the bootstrap's ranks: creates the transports the options name (loading
  // their modules; engine/setup.cpp), exchanges addresses and connects. On any rank's failure
  // every rank gets null and `status` says which rank failed and why.
  static std::unique_ptr<Engine> create(int rank, int ranks, std::unique_ptr<Bootstrap> bootstrap,
                                        const EngineOptions& options, Status& status);
  // The same over transports the caller made (tests, benchmarks): `exact` carries the exact
  // calls (null: the bootstrap does), `bounded` the bounded ones (null: `exact` does). A rank
  // whose transport could not be made passes a null where the others pass one.
  static std::unique_ptr<Engine> create(int rank, int ranks, std::unique_ptr<Transport> exact,
                                        std::unique_ptr<Transport> bounded, std::unique_ptr<Bootstrap> bootstrap,
                                        const EngineOptions& options, Status& status);
  ~Engine();
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  // output[i] = sum over ranks of input[i], `count` elements of `format`. input may equal output
  // (in place). Reads input and writes output only while the call runs. `bounded` allows
  // deadlines (once calibrated and unless the loss budget says otherwise). Every rank passes the
  // same count, format and bounded. 16-bit elements travel as 16 bits; the owner of each element
  // sums it in float32, in one fixed order, and rounds once: every rank gets the same bits.
  CallStats allreduce(const void* input, void* output, std::uint64_t count, ElementFormat format, bool bounded = false);
  CallStats allreduce_sum(const float* input, float* output, std::uint64_t count, bool bounded = false) {
    return allreduce(input, output, count, ElementFormat::float32, bounded);
  }
  // The same allreduce on a rank whose caller failed its part before it (`failed_here` not ok: its
  // input is not to be used). The call fails on every rank: here with `failed_here`, on the peers
  // by this rank's notice or their own deadlines (hierarchy/host_tiers.hpp).
  CallStats allreduce(const void* input, void* output, std::uint64_t count, ElementFormat format, bool bounded,
                      const Status& failed_here);
  // Rank r's block of the sum over ranks: `input` holds every rank's block in rank order
  // (counts[p] elements for rank p: one count per rank, the same on every rank, zeros allowed),
  // `output` receives the sum of block r (counts[r] elements). In place (input == output) the
  // input is read from `output`, and block r is written at its start. Bounded like an allreduce;
  // what is still missing at the deadline is left out of the sum (never rescaled) and counted.
  CallStats reduce_scatter(const void* input, void* output, std::span<const std::uint64_t> counts, ElementFormat format,
                           bool bounded = false);
  // The same, as one slice's exchange in a three-stage reduce-scatter
  // (hierarchy/host_reduce_scatter.cpp): a rank whose caller failed its part enters flagged (as
  // the allreduce above); the ranks do not leave together where a block is empty (the host stages
  // hold them). Each stays until every rank closed its block (or the call failed), as every
  // reduce-scatter does (call/tar_call.cpp), so that none leaves it succeeded while another failed it.
  CallStats reduce_scatter(const void* input, void* output, std::span<const std::uint64_t> counts, ElementFormat format,
                           bool bounded, const Status& failed_here);

  // Collective: from here on an allreduce (of any format) runs in three stages over `placement`
  // (hierarchy/host_tiers.hpp), each slice's exchange over an engine `make` gives, and so does a
  // reduce-scatter where HostTiers::takes_reduce_scatter. On any rank's failure every rank stays flat and gets it back.
  // Engine::create above does this where hierarchy/shape.hpp says the placement calls for it.
  Status enable_hierarchy(const Placement& placement, const HostTiers::MakeEngine& make);
  // Null while the calls are flat.
  const HostTiers* tiers() const { return tiers_.get(); }
  // Every rank of this engine calls it before its first call, or none (a slice's engine): exact
  // calls over the job's MPI then sum one more element, whether a rank's caller failed the call,
  // so such a failure fails the call on every rank there too.
  void flag_failures_over_bootstrap() { failure_flag_over_bootstrap_ = true; }

  // When this rank last left a list exchange, of this engine or (as noted) of another engine of
  // its communicator: peers may still be in it for TarCall::longest_exchange_lag, and an exact
  // call's watchdog counts from then (call/list_exchange.cpp). The zero time point: never.
  Clock::time_point list_left() const { return state_.latest_list_left(); }
  void note_list_left(Clock::time_point left) { state_.other_list_left = std::max(state_.other_list_left, left); }

  int rank() const { return state_.rank; }
  int ranks() const { return state_.ranks; }
  std::uint64_t comm_id() const { return state_.comm_id; }
  // Bytes of the engine's own reusable buffers (staging and receive slots).
  std::size_t buffer_bytes() const;
  std::size_t largest_call_bytes() const { return state_.largest_call_bytes; }
  // Scatter-reduce contributions added where the transport held them, and those that waited in
  // a slot (they came ahead of their turn in the summation order, or the transport did not hold them).
  std::uint64_t contributions_added_on_arrival() const { return state_.scatter.added_on_arrival(); }
  std::uint64_t contributions_waited_in_slot() const { return state_.scatter.waited_in_slot(); }
  const RejectCounts& rejects() const { return state_.rejects; }
  const AgreedCounts& agreed() const { return state_.agreed; }
  const LateArrivals& late_arrivals() const { return state_.late; }
  const CallStats& last_call() const { return state_.last_call; }
  // Summed over the transports.
  TransportCounters transport_counters() const;
  // What carries which calls, e.g. "tcp/lo" or "exact: sysv/memory; bounded: udp lo".
  std::string transport_description() const;

 private:
  struct Paths {
    // exact: reliable (null: exact calls go over the bootstrap); bounded null: exact carries them.
    std::unique_ptr<TransportPath> exact, bounded;
  };
  Engine(int rank, int ranks, std::uint64_t comm_id, Paths paths, std::unique_ptr<Bootstrap> bootstrap,
         const EngineOptions& options);

  // Bounded calls: over their own transport, else the exact one (create() makes at least one).
  static TransportPath* bounded_of(const Paths& paths) { return paths.bounded ? paths.bounded.get() : paths.exact.get(); }
  TransportPath* bounded_path() { return bounded_of(paths_); }
  CallKind choose_kind(unsigned call_class) const;
  // A reduce-scatter, checked.
  CallStats scatter_call(const void* input, void* output, std::span<const std::uint64_t> counts, ElementFormat format,
                         bool allow_bounded, const Status& failed_here);
  // Either operation: `call` names the buffers, the shape, the count and the class.
  CallStats run_call(TarRequest call, bool allow_bounded);
  // A call over every rank at once (not in three stages): its kind, its path, its agreements.
  CallStats run_flat(TarRequest& call, bool allow_bounded, CallStats stats, Clock::time_point start);
  CallStats run_tar(TransportPath& path, const TarRequest& request, CallStats stats, Clock::time_point start);
  // Exact calls over the bootstrap, for when no reliable transport is there.
  CallStats exact_over_bootstrap(const TarRequest& call, CallStats stats, Clock::time_point start);
  // Calibration and fallback calls whose bounded calls go over another transport: a timing run
  // of that transport on the same data teaches the deadlines (the result is already exact).
  CallStats probe(const TarRequest& call, CallStats stats, double exact_us);
  // Calibration over a bounded transport that may lose data: the call runs there first, exact by
  // resends where every rank got everything, and again over the exact path where some rank did not.
  bool calibrates_over_datagrams(const TarRequest& call) const;
  CallStats calibrate_over_datagrams(const TarRequest& call, CallStats stats, Clock::time_point start);
  // Where a probe, or a calibration run in place, writes (the engine's buffer, grown as needed).
  void* probe_buffer(std::uint64_t bytes);
  // What a run of the bounded transport (`needed`: TarCall::teach_deadlines' estimates) teaches
  // the calibration of its class, each phase at most `most_us`; and, in calibration, the pace.
  void teach_calibration(const TarRequest& call, const PhaseTimes& needed, const CallStats& run,
                         double most_us = std::numeric_limits<double>::infinity());
  // The pace of datagrams from a calibration run of the bounded transport.
  void learn_pace(const TarRequest& call, double call_us);
  // Pushes out what an earlier call still queues on the bounded transport (briefly).
  void drain_bounded_sends();
  // After a call failed here, on every rank (each fails the same call, by its watchdog or by a
  // peer's notice): the ranks exchange what they waited for, and all report the same ranks.
  Status agree_on_failure(const Status& mine, CallKind kind);

  EngineState state_;
  // After the state: destroyed first, so sends they still progress never read freed staging.
  Paths paths_;
  std::unique_ptr<HostTiers> tiers_;  // three-stage calls; null: flat
  StepAside step_aside_{false, 0};  // set by create() once the ranks agreed it may
  bool broken_ = false;
  bool failure_flag_over_bootstrap_ = false;
};

}  // namespace optireduce
