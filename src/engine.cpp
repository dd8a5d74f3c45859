#include "optireduce/engine/engine.hpp"

#include <climits>
#include <cstring>
#include <random>

#include "optireduce/byte_order.hpp"
#include "optireduce/engine/log.hpp"
#include "optireduce/engine/tar_schedule.hpp"
#include "optireduce/engine/transport_loader.hpp"

namespace optireduce {
namespace {

const char* module_of(TransportKind kind) {
  switch (kind) {
    case TransportKind::udp: return "udp";
    case TransportKind::ofi: return "ofi";
    case TransportKind::automatic:
    case TransportKind::ucx: break;
  }
  return "ucx";
}

std::uint64_t random_nonce() {
  std::random_device device;
  std::uint64_t n = (static_cast<std::uint64_t>(device()) << 32) ^ device();
  n ^= static_cast<std::uint64_t>(Clock::now().time_since_epoch().count());
  return n ? n : 1;
}

// Every rank contributes whether it succeeded (and why not); all agree on failure if any failed.
Status all_ranks_ok(Bootstrap& bootstrap, const Status& mine, const char* what) {
  const std::string text = mine.ok() ? std::string() : mine.text();
  std::vector<std::byte> blob(1 + text.size());
  blob[0] = std::byte{static_cast<unsigned char>(mine.ok() ? 1 : 0)};
  std::memcpy(blob.data() + 1, text.data(), text.size());
  const auto all = bootstrap.allgather(blob);
  for (std::size_t r = 0; r < all.size(); ++r)
    if (all[r].empty() || all[r][0] != std::byte{1}) {
      const std::string why(reinterpret_cast<const char*>(all[r].data()) + (all[r].empty() ? 0 : 1),
                            all[r].empty() ? 0 : all[r].size() - 1);
      return PeerError("rank " + std::to_string(r) + " " + what + (why.empty() ? "" : ": " + why));
    }
  return {};
}

double us_since(Clock::time_point t) { return std::chrono::duration<double, std::micro>(Clock::now() - t).count(); }

}  // namespace

const char* to_string(TransportKind kind) {
  switch (kind) {
    case TransportKind::automatic: return "auto";
    case TransportKind::ucx: return "ucx";
    case TransportKind::udp: return "udp";
    case TransportKind::ofi: return "ofi";
  }
  return "?";
}

std::unique_ptr<Engine> Engine::create(int rank, int ranks, std::unique_ptr<Bootstrap> bootstrap,
                                       const EngineOptions& options, Status& status) {
  const char* module = module_of(options.transport);
  Status made;
  auto transport = create_transport(module, options.transport_settings, made);
  if (!transport) OR_LOG(warn, "cannot start the %s transport: %s", module, made.text().c_str());
  return create(rank, ranks, std::move(transport), std::move(bootstrap), options, status);
}

std::unique_ptr<Engine> Engine::create(int rank, int ranks, std::unique_ptr<Transport> transport,
                                       std::unique_ptr<Bootstrap> bootstrap, const EngineOptions& options, Status& status) {
  // Blob: [ok][comm nonce, 8 bytes][transport address].
  std::vector<std::byte> blob(9);
  blob[0] = std::byte{static_cast<unsigned char>(transport ? 1 : 0)};
  const std::uint64_t nonce = random_nonce();
  std::memcpy(blob.data() + 1, &nonce, sizeof nonce);
  if (transport) {
    const auto address = transport->local_address();
    blob.insert(blob.end(), address.begin(), address.end());
  }
  const auto blobs = bootstrap->allgather(blob);
  std::vector<std::vector<std::byte>> addresses(static_cast<std::size_t>(ranks));
  for (int r = 0; r < ranks; ++r) {
    if (blobs[r].size() < 9 || blobs[r][0] != std::byte{1}) {
      status = Unavailable("rank " + std::to_string(r) + " could not create its transport");
      return nullptr;
    }
    addresses[r].assign(blobs[r].begin() + 9, blobs[r].end());
  }
  std::uint64_t comm_id = 0;
  std::memcpy(&comm_id, blobs[0].data() + 1, sizeof comm_id);
  const Status connected = transport->connect(rank, addresses, Clock::now() + options.watchdog);
  status = all_ranks_ok(*bootstrap, connected, "could not connect to its peers");
  if (!status.ok()) return nullptr;
  return std::unique_ptr<Engine>(new Engine(rank, ranks, comm_id, std::move(transport), std::move(bootstrap), options));
}

Engine::Engine(int rank, int ranks, std::uint64_t comm_id, std::unique_ptr<Transport> transport,
               std::unique_ptr<Bootstrap> bootstrap, const EngineOptions& options)
    : state_(rank, ranks, comm_id, options, std::move(bootstrap)), transport_(std::move(transport)) {}

Engine::~Engine() = default;

std::size_t Engine::buffer_bytes() const {
  return state_.staging.bytes() + state_.scatter.buffer_bytes() +
         (state_.probe_input.capacity() + state_.probe_output.capacity()) * sizeof(float);
}

CallKind Engine::choose_kind(unsigned cls) const {
  // Every input here is the same on every rank: the options, the call sequence, the number of
  // calibration calls per size class, and what the agreement rounds decided.
  if (state_.deadlines.calibrating(cls)) return CallKind::calibration;
  if (state_.loss_budget.exact_until(state_.calls + 1)) return CallKind::fallback;
  return CallKind::bounded;
}

CallStats Engine::allreduce_sum(const float* input, float* output, std::uint64_t count, bool allow_bounded) {
  const auto start = Clock::now();
  CallStats stats;
  stats.entries = count;
  if (broken_) {
    stats.status = PeerError("an earlier call on this communicator failed");
    return stats;
  }
  const unsigned cls = size_class(count * sizeof(float));
  stats.kind = allow_bounded ? choose_kind(cls) : CallKind::exact;
  stats.sequence = ++state_.calls;
  // The path of the call: bounded calls over the transport; exact ones over it when it is
  // reliable, otherwise over the bootstrap (with a probe of the transport while calibrating).
  if (stats.kind == CallKind::bounded || transport_->traits().reliable) {
    stats = run_tar({input, output, count, cls, nullptr}, std::move(stats), start);
    if (!stats.ok()) stats.status = agree_on_failure(stats.status);
  } else {
    stats = exact_over_bootstrap(input, output, count, std::move(stats), start, cls);
  }
  if (stats.kind == CallKind::bounded && stats.ok())
    state_.loss_budget.after_bounded_call(stats, state_.calls, *state_.bootstrap, state_.agreed);
  state_.agreed.injected_drops = state_.faults.injected_drops();
  if (!stats.ok()) broken_ = true;
  state_.last_call = stats;
  return stats;
}

Status Engine::agree_on_failure(const Status& mine) {
  using FailureView = EngineState::FailureView;
  // Blob: [when this rank entered the call, ns][what it waited for from each rank].
  const auto ranks = static_cast<std::size_t>(state_.ranks);
  std::vector<std::byte> blob(8 + ranks, std::byte{0});
  put_le<std::int64_t>(blob.data(), state_.call_entered_ns);
  for (std::size_t p = 0; p < state_.failure_view.size() && p < ranks; ++p) blob[8 + p] = static_cast<std::byte>(state_.failure_view[p]);
  const auto views = state_.bootstrap->allgather(blob);
  const std::int64_t watchdog_ns = std::chrono::duration_cast<std::chrono::nanoseconds>(state_.options.watchdog).count();
  std::int64_t first = INT64_MAX;
  for (const auto& v : views)
    if (v.size() == blob.size()) first = std::min(first, get_le<std::int64_t>(v.data()));
  // The ranks that were not there when the first rank's watchdog ran out; else those some rank
  // waited for to start; else those it waited for to finish.
  std::string names[3];
  for (std::size_t p = 0; p < ranks && p < views.size(); ++p) {
    if (views[p].size() == blob.size() && get_le<std::int64_t>(views[p].data()) > first + watchdog_ns)
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
  const auto watchdog = std::to_string(state_.options.watchdog.count());
  return Timeout("ranks " + silent + " did not answer within " + watchdog + " ms (OPTIREDUCE_WATCHDOG_MS=" + watchdog + ")");
}

CallStats Engine::run_tar(const TarRequest& request, CallStats stats, Clock::time_point start) {
  TarCall call(state_, *transport_, request, std::move(stats), start);
  return call.run();
}

CallStats Engine::exact_over_bootstrap(const float* input, float* output, std::uint64_t count, CallStats stats,
                                       Clock::time_point start, unsigned cls) {
  const bool teach = stats.kind != CallKind::exact;
  const float* probe_source = input;
  if (teach && input == output) {
    state_.probe_input.assign(input, input + count);
    probe_source = state_.probe_input.data();
  }
  // Datagrams of an earlier call still queued here would sit unsent while this rank blocks in
  // the job's MPI, and a peer waiting for them would wait out its deadline: push them out first,
  // for a short while at most.
  TarCall idle(state_, *transport_, {}, stats, start);
  const auto drain_until = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                              std::chrono::duration<double, std::micro>(DeadlineController::drain_before_exact_us()));
  auto handler = [&](const InboundMessage& m) { idle.handle(m); };
  auto drained = [&] {
    for (int p = 0; p < state_.ranks; ++p)
      if (p != state_.rank && transport_->sends_in_flight(p) != 0) return false;
    return true;
  };
  while (!drained() && Clock::now() < drain_until) (void)transport_->poll(drain_until, handler);
  transport_->abandon_queued_sends();
  if (!state_.bootstrap->allreduce_sum(input, output, count)) {
    stats.status = PeerError("the exact allreduce over the job's MPI failed");
    stats.latency_us = us_since(start);
    return stats;
  }
  const double exact_us = us_since(start);
  stats.phase_us = {exact_us, 0.0};
  if (teach) stats = probe(probe_source, count, std::move(stats), cls, exact_us);
  stats.latency_us = us_since(start);
  return stats;
}

CallStats Engine::probe(const float* input, std::uint64_t count, CallStats stats, unsigned cls, double exact_us) {
  // The result is exact already. Now time the datagram path on the same data, so that bounded
  // calls get the deadlines of the network they will run on, not those of the job's MPI.
  if (state_.probe_output.size() < count) state_.probe_output.resize(count);
  PhaseDeadlines budget;
  budget.us.fill(state_.deadlines.probe_budget_us(cls, exact_us));
  const CallStats probed = run_tar({input, state_.probe_output.data(), count, cls, &budget}, stats, Clock::now());
  if (!probed.ok()) stats.status = probed.status;
  if (stats.kind == CallKind::calibration && probed.ok()) {
    // This rank's sends in all: its contributions to every other shard, its shard to every peer.
    const double own = double(ShardLayout(count, state_.ranks, state_.options.chunk_elems).shard_size(state_.rank));
    const double bytes = (double(count) - own + own * (state_.ranks - 1)) * sizeof(float);
    // The pace of the path bounded calls take, the fastest of the calibration's probes: the
    // exact call over the job's MPI rides TCP, and one retransmission timeout there would
    // throttle every bounded call that follows.
    const double pace = state_.deadlines.pace_bytes_per_s(bytes, probed.latency_us);
    if (!state_.deadlines.calibrating(cls)) transport_->suggest_pace(pace);
  }
  return stats;
}

EngineState::EngineState(int rank_, int ranks_, std::uint64_t comm_id_, const EngineOptions& options_,
                         std::unique_ptr<Bootstrap> bootstrap_)
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
      staging(rank_, ranks_),
      hadamard(options_.hadamard_block_log2, options_.hadamard_overlap && options_.hadamard != HadamardMode::off && ranks_ > 1),
      faults(options_.faults, rank_),
      loss_budget(options, rank_) {
  send_order = shard_send_order(rank, ranks);
}

}  // namespace optireduce
