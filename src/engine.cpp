#include "engine.hpp"

#include <algorithm>
#include <cmath>
#include <bit>
#include <cstring>
#include <thread>

#include "hadamard.hpp"
#include "log.hpp"
#include "stats.hpp"
#include "tar_schedule.hpp"

namespace optireduce {

const char* to_string(CallStatus s) {
  switch (s) {
    case CallStatus::ok: return "ok";
    case CallStatus::timeout: return "timeout";
    case CallStatus::transport_error: return "transport_error";
    case CallStatus::broken: return "broken";
  }
  return "?";
}

const char* to_string(CallKind k) {
  switch (k) {
    case CallKind::exact: return "exact";
    case CallKind::calibration: return "calibration";
    case CallKind::bounded: return "bounded";
    case CallKind::fallback: return "fallback";
  }
  return "?";
}

namespace {

constexpr std::size_t kMinEarlyBudget = 16u << 20;
// A bounded call keeps data of calls at most this far ahead (a peer may run ahead of a slow rank).
constexpr std::uint64_t kEarlyEpochs = 4;
// Once every sender's last slice of a phase is in, wait at most this share of the phase budget
// for stragglers still in flight (datagrams can arrive out of order), then close.
constexpr double kGraceShare = 0.05;
// A probe of the datagram path may take this many times the exact call it shadows.
constexpr double kProbeBudgetFactor = 4.0;
// How long a bounded call waits for the other ranks' lists of missing chunks: the all-gather
// budget, at least kAgreeMinUs. A peer still waiting out its own all-gather deadline sends its
// list up to a whole budget after this rank's phase ended, and giving up earlier leaves the
// replicas different for the rest of a training run (a quarter of the budget did: tail-3
// PyTorch runs had 19 divergent calls over UCX, and datagram replicas drifted apart). Over
// datagrams a list may also be lost (it goes twice); then the wait costs a budget.
constexpr double kAgreeShare = 1.0;
constexpr double kAgreeMinUs = 500;
constexpr int kMissingCopies = 2;
constexpr double kDrainBeforeExactUs = 20000;
// Datagrams are paced at this multiple of the rate the exact calls achieved.
constexpr double kPaceHeadroom = 2.0;

std::uint64_t random_nonce() {
  std::random_device device;
  std::uint64_t n = (static_cast<std::uint64_t>(device()) << 32) ^ device();
  n ^= static_cast<std::uint64_t>(Clock::now().time_since_epoch().count());
  return n ? n : 1;
}

// Every rank contributes whether it succeeded; all agree on failure if any rank failed.
bool all_ranks_ok(Bootstrap& bootstrap, bool ok, int& first_failed) {
  const std::byte mine{static_cast<unsigned char>(ok ? 1 : 0)};
  auto all = bootstrap.allgather({&mine, 1});
  for (std::size_t r = 0; r < all.size(); ++r)
    if (all[r].size() != 1 || all[r][0] != std::byte{1}) {
      first_failed = static_cast<int>(r);
      return false;
    }
  return true;
}

double us_since(Clock::time_point t) { return std::chrono::duration<double, std::micro>(Clock::now() - t).count(); }

Clock::time_point after_us(Clock::time_point t, double us) {
  return t + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double, std::micro>(us));
}

float median(std::vector<float> v) {
  if (v.empty()) return 0;
  std::nth_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(v.size() / 2), v.end());
  return v[v.size() / 2];
}

}  // namespace

std::unique_ptr<Engine> Engine::create(int rank, int ranks, std::unique_ptr<Transport> transport,
                                       std::unique_ptr<Bootstrap> bootstrap, const EngineOptions& options,
                                       std::string& error) {
  // Blob: [ok][comm nonce, 8 bytes][transport address].
  std::vector<std::byte> blob(9);
  blob[0] = std::byte{static_cast<unsigned char>(transport ? 1 : 0)};
  const std::uint64_t nonce = random_nonce();
  std::memcpy(blob.data() + 1, &nonce, sizeof nonce);
  if (transport) {
    auto address = transport->local_address();
    blob.insert(blob.end(), address.begin(), address.end());
  }
  auto blobs = bootstrap->allgather(blob);
  std::vector<std::vector<std::byte>> addresses(ranks);
  for (int r = 0; r < ranks; ++r) {
    if (blobs[r].size() < 9 || blobs[r][0] != std::byte{1}) {
      error = "rank " + std::to_string(r) + " could not create its transport";
      return nullptr;
    }
    addresses[r].assign(blobs[r].begin() + 9, blobs[r].end());
  }
  std::uint64_t comm_id = 0;
  std::memcpy(&comm_id, blobs[0].data() + 1, sizeof comm_id);

  const bool connected = transport->connect(rank, addresses, Clock::now() + options.timeout) == TransportStatus::ok;
  int failed = -1;
  if (!all_ranks_ok(*bootstrap, connected, failed)) {
    error = "rank " + std::to_string(failed) + " could not connect to its peers within " +
            std::to_string(options.timeout.count()) + " ms";
    return nullptr;
  }
  return std::unique_ptr<Engine>(
      new Engine(rank, ranks, comm_id, std::move(transport), std::move(bootstrap), options));
}

Engine::Engine(int rank, int ranks, std::uint64_t comm_id, std::unique_ptr<Transport> transport,
               std::unique_ptr<Bootstrap> bootstrap, const EngineOptions& options)
    : rank_(rank),
      ranks_(ranks),
      comm_id_(comm_id),
      transport_(std::move(transport)),
      bootstrap_(std::move(bootstrap)),
      options_(options),
      deadlines_([&] {
        DeadlineOptions d;
        d.calibration_calls = options.calibration_calls;
        d.cap_us = std::chrono::duration<double, std::micro>(options.timeout).count();
        return d;
      }()),
      posted_(ranks, 0),
      fault_rng_(options.faults.seed * 0x9e3779b97f4a7c15ull + static_cast<std::uint64_t>(rank)) {
  const std::size_t fits = (transport_->max_message_bytes() - WireHeader::kEncodedSize) / sizeof(float);
  chunk_elems_ = static_cast<std::uint32_t>(std::max<std::size_t>(1, std::min<std::size_t>(options.chunk_elems, fits)));
  last_slices_ = transport_->reliable() ? kLastSlicesInOrder : kLastSlicesDatagrams;
  if (options.hadamard_overlap && options.hadamard != HadamardMode::off && ranks > 1)
    worker_ = std::make_unique<HadamardWorker>();
}

Engine::~Engine() = default;

std::size_t Engine::buffer_bytes() const {
  std::size_t bytes = (slots_.capacity() + probe_input_.capacity() + probe_output_.capacity()) * sizeof(float);
  for (const auto& s : staging_) bytes += s->data.capacity() * sizeof(float) + s->headers.capacity() * WireHeader::kEncodedSize;
  return bytes;
}

CallKind Engine::choose_kind(unsigned cls) const {
  // Every input here is the same on every rank: the options, the call sequence, the number of
  // calibration calls per size class, and what the agreement rounds decided.
  if (deadlines_.calibrating(cls)) return CallKind::calibration;
  if (calls_ + 1 <= reliable_until_) return CallKind::fallback;
  return CallKind::bounded;
}

bool Engine::staging_free(const Staging& s) const {
  // UCX completes the sends to one peer in the order they were posted, so the sends that read
  // `s` are done once at most the sends posted after them are still in flight.
  for (int p = 0; p < ranks_; ++p)
    if (p != rank_ && posted_[p] - transport_->sends_in_flight(p) < s.posted_until[p]) return false;
  return true;
}

TransportStatus Engine::wait_until(Clock::time_point deadline, const std::function<bool()>& done,
                                   bool give_up_quietly) {
  auto handler = [this](const InboundMessage& m) { on_message(m); };
  while (!done()) {
    if (Clock::now() >= deadline) return give_up_quietly ? TransportStatus::ok : TransportStatus::timeout;
    if (transport_->poll(deadline, handler) == TransportStatus::error) return TransportStatus::error;
  }
  return TransportStatus::ok;
}

Engine::Staging& Engine::pick_staging(bool bounded, Clock::time_point deadline, TransportStatus& ts) {
  auto fresh = [this]() -> Staging& {
    staging_.push_back(std::make_unique<Staging>());
    staging_.back()->posted_until.assign(ranks_, 0);
    return *staging_.back();
  };
  if (staging_.empty()) return fresh();
  // Any buffer whose sends have all completed, the least recently used first (it leaves the
  // last call's sends untouched longest). Exact calls end only when every peer has their data,
  // so an exact-only engine keeps one buffer.
  for (std::size_t i = 1; i <= staging_.size(); ++i) {
    Staging& s = *staging_[(epoch_ + i) % staging_.size()];
    if (staging_free(s)) return s;
  }
  if (bounded && staging_.size() < kMaxStaging) return fresh();
  Staging& s = *staging_[epoch_ % staging_.size()];
  // Datagrams still queued for an earlier call are late by now: drop them rather than wait for a
  // peer that may not read again until this rank joins it in another collective.
  if (bounded && transport_->abandon_queued_sends() && staging_free(s)) return s;
  ts = wait_until(deadline, [&] { return staging_free(s); }, false);
  return s;
}

void Engine::begin_call(Staging& staging, float* output, std::uint64_t count) {
  ++epoch_;
  in_call_ = true;
  transformed_ = false;
  current_ = &staging;
  layout_ = ShardLayout(count, ranks_, chunk_elems_);
  output_ = output;
  largest_call_bytes_ = std::max<std::size_t>(largest_call_bytes_, count * sizeof(float));

  const std::uint32_t own_chunks = layout_.chunks_in_shard(rank_);
  slot_stride_ = layout_.shard_size(rank_);
  if (staging.data.size() < count) staging.data.resize(count);
  if (slots_.size() < slot_stride_ * (ranks_ - 1)) slots_.resize(slot_stride_ * (ranks_ - 1));

  contributors_.assign(own_chunks, 0);
  scatter_seen_.assign(static_cast<std::size_t>(ranks_) * own_chunks, 0);
  gather_seen_.assign(static_cast<std::size_t>(ranks_) * layout_.max_chunks(), 0);
  last_slice_seen_.assign(kTarPhases * ranks_, 0);
  done_from_.assign(ranks_, 0);
  stamped_.assign(kTarPhases * ranks_, 0);
  for (auto& s : stamps_) s.clear();
  ready_.clear();
  reduced_chunks_ = 0;
  scatter_received_ = 0;
  scatter_expected_ = static_cast<std::uint64_t>(own_chunks) * (ranks_ - 1);
  gather_remaining_ = 0;
  for (int p = 0; p < ranks_; ++p)
    if (p != rank_) gather_remaining_ += layout_.chunks_in_shard(p);
  gather_expected_ = gather_remaining_;
  decoded_.assign(ranks_, 0);
  encoded_.assign(ranks_, 0);
  gather_pending_.assign(ranks_, 0);
  for (int p = 0; p < ranks_; ++p)
    if (p != rank_) gather_pending_[p] = layout_.chunks_in_shard(p);
  dropped_entries_ = 0;
  filled_entries_ = 0;
  last_arrival_.fill(Clock::now());

  chunk_base_.assign(ranks_, 0);
  for (int p = 1; p < ranks_; ++p) chunk_base_[p] = chunk_base_[p - 1] + layout_.chunks_in_shard(p - 1);
  const std::uint64_t total_chunks = chunk_base_[ranks_ - 1] + layout_.chunks_in_shard(ranks_ - 1);
  missing_bytes_ = static_cast<std::size_t>((total_chunks + 7) / 8);
  missing_piece_bytes_ = std::max<std::size_t>(1, transport_->max_message_bytes() - WireHeader::kEncodedSize);
  missing_pieces_per_rank_ = missing_bytes_ ? (missing_bytes_ + missing_piece_bytes_ - 1) / missing_piece_bytes_ : 0;
  union_missing_.assign(missing_bytes_, std::byte{0});
  counted_.assign(static_cast<std::size_t>(total_chunks), 0);
  missing_pieces_.assign(static_cast<std::size_t>(ranks_) * missing_pieces_per_rank_, 0);
  missing_complete_ = 0;

  // One header slot per send of this call, sized up front: UCX reads a header until its send
  // completes, so the storage must not move while the call runs.
  // Scatter: every chunk of every other shard, once.
  const std::size_t sends = static_cast<std::size_t>(total_chunks - own_chunks) +
                            static_cast<std::size_t>(own_chunks + 1 + kMissingCopies * missing_pieces_per_rank_) * (ranks_ - 1);
  if (staging.headers.size() < sends) staging.headers.resize(sends);
  staging.posted_until.assign(ranks_, 0);
  headers_used_ = 0;

  if (ranks_ == 1)
    for (std::uint32_t c = 0; c < own_chunks; ++c) ready_.push_back(c);
}

CallStats Engine::allreduce_sum(const float* input, float* output, std::uint64_t count, bool allow_bounded) {
  const auto start = Clock::now();
  CallStats stats;
  stats.entries = count;
  if (broken_) {
    stats.status = CallStatus::broken;
    return stats;
  }
  const unsigned cls = size_class(count * sizeof(float));
  stats.kind = allow_bounded ? choose_kind(cls) : CallKind::exact;
  stats.sequence = ++calls_;
  if (!transport_->reliable() && stats.kind != CallKind::bounded)
    return exact_over_bootstrap(input, output, count, stats, start, cls);
  return tar_call(input, output, count, stats, start, cls, nullptr);
}

CallStats Engine::exact_over_bootstrap(const float* input, float* output, std::uint64_t count, CallStats stats,
                                       Clock::time_point start, unsigned cls) {
  const bool teach = stats.kind != CallKind::exact;
  const float* probe_source = input;
  if (teach && input == output) {
    probe_input_.assign(input, input + count);
    probe_source = probe_input_.data();
  }
  // Datagrams of an earlier call still queued here (a window waiting for a peer to read) would
  // sit unsent while this rank blocks in the job's MPI, and a peer still waiting for them would
  // wait out its deadline: push them out first, for a short while at most.
  wait_until(after_us(Clock::now(), kDrainBeforeExactUs), [&] {
    for (int p = 0; p < ranks_; ++p)
      if (p != rank_ && transport_->sends_in_flight(p) != 0) return false;
    return true;
  }, true);
  transport_->abandon_queued_sends();
  if (!bootstrap_->allreduce_sum(input, output, count)) {
    broken_ = true;
    stats.status = CallStatus::transport_error;
    stats.latency_us = us_since(start);
    OR_LOG(error, "exact allreduce of %llu floats over the job's MPI failed", static_cast<unsigned long long>(count));
    last_call_ = stats;
    return stats;
  }
  const double exact_us = us_since(start);
  stats.phase_us = {exact_us, 0.0};
  if (teach) {
    // The result is exact already. Now time the datagram path on the same data, so that bounded
    // calls get the deadlines of the network they will run on, not those of the job's MPI.
    if (probe_output_.size() < count) probe_output_.resize(count);
    PhaseDeadlines budget;
    // The first exact call of a class may include the MPI's own connection set-up: later probes
    // take their budget from the fastest exact call seen, so one slow call cannot stretch them.
    double& fastest = fastest_exact_us_[cls];
    fastest = fastest > 0 ? std::min(fastest, exact_us) : exact_us;
    budget.us.fill(std::min(std::chrono::duration<double, std::micro>(options_.timeout).count(), kProbeBudgetFactor * fastest));
    const CallStats probe = tar_call(probe_source, probe_output_.data(), count, stats, Clock::now(), cls, &budget);
    if (probe.status != CallStatus::ok) stats.status = probe.status;
    // The pace of the datagrams: the rate at which the job's MPI moved this rank's share of
    // the call, with headroom; the largest class calibrated so far sets it.
    if (stats.kind == CallKind::calibration && !deadlines_.calibrating(cls) && exact_us > 0) {
      const double own = double(ShardLayout(count, ranks_, chunk_elems_).shard_size(rank_));
      const double bytes = (double(count) - own + own * (ranks_ - 1)) * sizeof(float);
      paced_bytes_per_s_ = std::max(paced_bytes_per_s_, kPaceHeadroom * bytes / (exact_us * 1e-6));
      transport_->suggest_pace(paced_bytes_per_s_);
    }
  }
  stats.latency_us = us_since(start);
  last_call_ = stats;
  return stats;
}

CallStats Engine::tar_call(const float* input, float* output, std::uint64_t count, CallStats stats, Clock::time_point start,
                           unsigned cls, const PhaseDeadlines* probe) {
  const bool bounded = stats.kind == CallKind::bounded || probe;
  const auto hard_deadline = start + options_.timeout;
  probing_ = probe != nullptr;

  const auto& f = options_.faults;
  if (bounded && !probe && f.delay_rank == rank_ && f.delay_ms > 0 &&
      std::uniform_real_distribution<double>(0, 1)(fault_rng_) < f.delay_probability)
    std::this_thread::sleep_for(std::chrono::duration<double, std::milli>(f.delay_ms));

  TransportStatus ts = TransportStatus::ok;
  Staging& staging = pick_staging(bounded, hard_deadline, ts);
  if (ts != TransportStatus::ok) return fail(stats, ts, start, count);
  begin_call(staging, output, count);
  scatter_source_ = staging.data.data();
  bounded_call_ = bounded;
  transformed_ = bounded && !probe && (options_.hadamard == HadamardMode::on ||
                             (options_.hadamard == HadamardMode::automatic && hadamard_active_));
  stats.transformed = transformed_;
  // Stage the input: a plain copy, or each shard encoded on its own (so a shard can be decoded
  // as soon as it is complete, and a lost chunk spreads over that shard's blocks).
  if (transformed_ && worker_) {
    // In the order the shards are first needed: the peers in send rotation, the own shard last.
    for (int k = 1; k <= ranks_; ++k) {
      const int p = k < ranks_ ? rotation_peer(rank_, ranks_, k) : rank_;
      encoded_[p] = worker_->submit([this, input, p] { encode_shard(input, p); });
    }
    await_encoded(rotation_peer(rank_, ranks_, 1));  // the first send needs it; the rest overlap
  } else if (transformed_) {
    for (int p = 0; p < ranks_; ++p) encode_shard(input, p);
  } else if (bounded) {
    if (count) std::memcpy(staging.data.data(), input, count * sizeof(float));
  } else {
    // An exact call returns only once every peer has all its data, so its scatter sends can read
    // the caller's input directly; only the own shard, which becomes the reduced result, is staged.
    const std::uint64_t own = layout_.shard_begin(rank_);
    // memcpy of nothing from a null pointer (count 0, an empty vector) is still undefined.
    if (const std::uint64_t own_size = layout_.shard_size(rank_))
      std::memcpy(staging.data.data() + own, input + own, own_size * sizeof(float));
    scatter_source_ = input;
  }
  // Deadlines and phase times count from here: encoding is this rank's own work, not the
  // network's, and calibration calls (which never encode) must measure the same thing.
  const auto scatter_start = Clock::now();

  // Early data of this call that arrived while an earlier one ran.
  if (!early_.empty()) {
    std::vector<EarlyMessage> pending;
    pending.swap(early_);
    early_bytes_ = 0;
    for (auto& m : pending) {
      if (m.header.epoch == epoch_) {
        note_stamps(m.header);
        apply(m.header, m.payload.size(), [&m](std::span<std::byte> dst) {
          std::memcpy(dst.data(), m.payload.data(), dst.size());
          return true;
        });
      } else if (m.header.epoch > epoch_) {
        early_bytes_ += m.payload.size();
        early_.push_back(std::move(m));
      } else {
        ++rejects_.stale;
      }
    }
  }

  PhaseDeadlines budget;
  budget.us.fill(std::chrono::duration<double, std::micro>(options_.timeout).count());
  if (probe) {
    budget = *probe;
  } else if (bounded) {
    budget = deadlines_.deadlines(cls);
    // The all-gather moves as much data as the scatter-reduce; it usually looks short only
    // because it overlaps it. Give it at least half the scatter budget.
    budget.us[1] = std::max(budget.us[1], 0.5 * budget.us[0]);
  }
  stats.deadline_us = bounded ? budget.us : std::array<double, kTarPhases>{};

  // Scatter-reduce: send every slice, taking in what arrives after each round of slices.
  auto handler = [this](const InboundMessage& m) { on_message(m); };
  const auto schedule = scatter_schedule(layout_, rank_, last_slices_);
  for (std::size_t i = 0; i < schedule.size() && ts == TransportStatus::ok; ++i) {
    const auto& s = schedule[i];
    await_encoded(s.peer);
    ts = send_chunk(s.peer, Phase::scatter_reduce, layout_.chunk(s.peer, s.chunk),
                    s.last_slice ? WireHeader::kFlagLastSlice : 0);
    if ((i + 1) % static_cast<std::size_t>(ranks_ - 1) == 0 && ts == TransportStatus::ok &&
        transport_->poll(Clock::time_point::min(), handler) == TransportStatus::error)
      ts = TransportStatus::error;
  }
  if (ts != TransportStatus::ok) return fail(stats, ts, start, count);

  // The reduction of each own chunk, and its all-gather, start as soon as its contributions are
  // in; the phase closes when all are in, or at its deadline.
  auto drain_ready = [&] {
    while (!ready_.empty()) {
      const std::uint32_t c = ready_.back();
      ready_.pop_back();
      reduce_chunk(c);
    }
  };
  // Runs one phase until `complete`, its deadline, or — once every sender's last slice of the
  // phase is in — a short grace fixed at that moment (datagrams may overtake each other).
  auto run_phase = [&](std::size_t phase, Clock::time_point phase_deadline, auto&& complete, auto&& sends_to_me) {
    auto deadline = std::min(phase_deadline, hard_deadline);
    bool grace_set = false;
    while (!complete()) {
      if (bounded && !grace_set) {
        bool all_last = true;
        for (int p = 0; p < ranks_; ++p)
          if (p != rank_ && sends_to_me(p) && !last_slice_seen_[phase * ranks_ + p]) all_last = false;
        if (all_last) {
          deadline = std::min(deadline, after_us(Clock::now(), kGraceShare * budget.us[phase]));
          grace_set = true;
        }
      }
      if (Clock::now() >= deadline) break;
      if (transport_->poll(deadline, handler) == TransportStatus::error) return TransportStatus::error;
      if (phase == 0) drain_ready();
    }
    return TransportStatus::ok;
  };
  drain_ready();
  if (run_phase(0, after_us(scatter_start, budget.us[0]), [&] { return own_shard_reduced(); },
                [&](int) { return layout_.chunks_in_shard(rank_) > 0; }) == TransportStatus::error)
    return fail(stats, TransportStatus::error, start, count);
  if (!own_shard_reduced()) {
    if (!bounded) return fail(stats, TransportStatus::timeout, start, count);
    close_scatter_phase();
  }
  stats.phase_us[0] = us_since(scatter_start);
  const double scatter_fraction = scatter_expected_ ? double(scatter_received_) / double(scatter_expected_) : 1.0;

  // All-gather: the owners' reduced chunks land in the output as they arrive.
  const auto gather_start = Clock::now();
  const auto phase_deadline = after_us(gather_start, budget.us[1]);
  if (run_phase(1, phase_deadline, [&] { return gather_remaining_ == 0; },
                [&](int p) { return layout_.chunks_in_shard(p) > 0; }) == TransportStatus::error)
    return fail(stats, TransportStatus::error, start, count);
  if (gather_remaining_ > 0 && !bounded) return fail(stats, TransportStatus::timeout, start, count);
  if (bounded && !probe && ranks_ > 1 && options_.agree_fill && options_.fill == FillPolicy::zero) {
    // Every rank is at the end of its gather phase by now, or within a budget of it, or late
    // beyond saving.
    const double wait_us = std::max(kAgreeMinUs, kAgreeShare * budget.us[1]);
    stats.fill_agreed = agree_on_missing(std::min(after_us(Clock::now(), wait_us), hard_deadline));
    if (!stats.fill_agreed) ++agreed_.fill_agreement_incomplete;
  }
  if (gather_remaining_ > 0) fill_missing_gather_chunks();
  // Without the worker, decoding once at the end keeps this rank's own work out of the phases'
  // deadlines, which were calibrated on the network alone (decoding a shard as soon as it
  // completes was measured to push phases past their deadlines on a busy host). With it, shards
  // complete before this point were decoded while the network ran; the rest is split between
  // the worker and this thread.
  if (transformed_) {
    if (worker_) {
      for (int p = 0, turn = 0; p < ranks_; ++p)
        if (!decoded_[p] && turn++ % 2 == 0) start_decode(p);
    }
    for (int p = 0; p < ranks_; ++p) decode_shard(p);
    if (worker_) worker_->wait_all();
  }
  stats.phase_us[1] = us_since(gather_start);
  const double gather_fraction =
      gather_expected_ ? double(gather_expected_ - gather_remaining_) / double(gather_expected_) : 1.0;

  // Tell the peers we have what we need, and keep driving our own queued sends until each peer
  // has them (a shared-memory FIFO only moves while its sender progresses). A bounded call stops
  // at its deadline whatever is still queued.
  for (int k = 1; k < ranks_ && ts == TransportStatus::ok; ++k)
    ts = send_chunk(rotation_peer(rank_, ranks_, k), Phase::done, {0, 0}, WireHeader::kFlagLastSlice);
  if (ts == TransportStatus::ok)
    ts = wait_until(bounded ? std::min(phase_deadline, hard_deadline) : hard_deadline, [&] { return peers_served(); },
                    bounded);
  output_ = nullptr;
  in_call_ = false;
  if (ts != TransportStatus::ok) return fail(stats, ts, start, count);
  for (int p = 0; p < ranks_; ++p) staging.posted_until[p] = posted_[p];

  // What this call teaches the deadlines: the time it would have needed for everything, from the
  // pace at which data actually came (until the last arrival, not until the deadline: data that
  // was lost, rather than slow, must not stretch the estimate, or deadlines would feed on
  // themselves and run away).
  // 0 means "no estimate" (nothing came in the phase itself): the controller keeps what it had,
  // and the loss budget, not the deadline, answers a network that delivers nothing in time.
  auto estimate = [](double phase_us, double fraction, Clock::time_point from, Clock::time_point last) {
    if (fraction >= 1.0) return phase_us;
    const double paced = std::chrono::duration<double, std::micro>(last - from).count();
    return fraction > 0.0 && paced > 0.0 ? paced / fraction : 0.0;
  };
  my_estimate_us_[0] = static_cast<float>(estimate(stats.phase_us[0], scatter_fraction, scatter_start, last_arrival_[0]));
  my_estimate_us_[1] = static_cast<float>(estimate(stats.phase_us[1], gather_fraction, gather_start, last_arrival_[1]));
  probing_ = false;
  if (probe) {
    // A probe's phase times are its budget when anything was lost; its pace is the network's.
    record_calibration(cls, {double(my_estimate_us_[0]) > 0 ? double(my_estimate_us_[0]) : stats.phase_us[0],
                             double(my_estimate_us_[1]) > 0 ? double(my_estimate_us_[1]) : stats.phase_us[1]});
    deadlines_.record_estimate(cls, {median(stamps_[0]), median(stamps_[1])});
    return stats;
  }
  if (stats.kind == CallKind::calibration || stats.kind == CallKind::fallback) record_calibration(cls, stats.phase_us);
  // Fallback calls run exactly but keep teaching the deadlines, so they are right when bounded
  // calls resume.
  if (bounded || stats.kind == CallKind::fallback)
    deadlines_.record_estimate(cls, {median(stamps_[0]), median(stamps_[1])});

  stats.dropped_entries = dropped_entries_;
  stats.filled_entries = filled_entries_;
  stats.latency_us = us_since(start);
  if (bounded) agree_after_bounded_call(stats);
  last_call_ = stats;
  return stats;
}

void Engine::record_calibration(unsigned cls, const std::array<double, kTarPhases>& phase_us) {
  // Every rank's own calibration saw other phase times (who waited for whom differs), so their
  // bounds differed by up to 2.5x in a training job on this host; the most impatient rank then
  // gave up on data the others were still sending, and with the fill agreed its loss became
  // everybody's. One bound for all: the largest, taken at the call that completes a
  // (re)calibration, which is the same call on every rank (calibration counts and fallbacks are
  // agreed). Blocking, but once per calibration of a size class.
  if (!deadlines_.record_calibration(cls, phase_us)) return;
  std::array<double, kTarPhases> mine{deadlines_.bound_us(cls, TarPhase::scatter), deadlines_.bound_us(cls, TarPhase::gather)};
  auto all = bootstrap_->allgather({reinterpret_cast<const std::byte*>(mine.data()), sizeof mine});
  for (const auto& blob : all) {
    std::array<double, kTarPhases> theirs{};
    if (blob.size() != sizeof theirs) continue;
    std::memcpy(theirs.data(), blob.data(), sizeof theirs);
    for (std::size_t p = 0; p < kTarPhases; ++p)
      if (std::isfinite(theirs[p])) mine[p] = std::max(mine[p], theirs[p]);
  }
  deadlines_.set_bounds(cls, mine);
}

void Engine::agree_after_bounded_call(const CallStats& call) {
  window_entries_ += call.entries;
  window_dropped_ += call.dropped_entries;
  // A call whose fill every rank agreed on left identical results even if it filled.
  if (call.filled_entries && !call.fill_agreed) window_filled_calls_ |= 1ull << bounded_since_agreement_;
  if (call.entries) window_worst_call_loss_ = std::max(window_worst_call_loss_, double(call.dropped_entries) / double(call.entries));
  if (++bounded_since_agreement_ < options_.sync_interval) return;

  // Decisions that change which collective runs must come out the same on every rank, so they
  // are taken from figures every rank has: a small all-gather over the bootstrap (the job's own
  // MPI) at the same call on every rank. It is started here and finished one window later, so a
  // late rank holds the others only if it is a whole window behind; the decisions apply from
  // the call that finishes it, on every rank alike.
  struct Figures {
    std::uint64_t entries, dropped, filled_calls;
    double worst_call_loss;
  } mine{window_entries_, window_dropped_, window_filled_calls_, window_worst_call_loss_};
  std::vector<std::vector<std::byte>> all;
  if (agreement_pending_) all = bootstrap_->finish_allgather();
  bootstrap_->start_allgather({reinterpret_cast<const std::byte*>(&mine), sizeof mine});
  const bool have_round = agreement_pending_;
  agreement_pending_ = true;
  std::uint64_t entries = 0, dropped = 0, filled = 0;
  double worst = 0;
  for (const auto& blob : all) {
    Figures f{};
    if (blob.size() == sizeof f) std::memcpy(&f, blob.data(), sizeof f);
    entries += f.entries;
    dropped += f.dropped;
    filled |= f.filled_calls;
    worst = std::max(worst, f.worst_call_loss);
  }
  if (have_round) {
    agreed_.divergent_calls += static_cast<std::uint64_t>(std::popcount(filled));
    const double average = entries ? double(dropped) / double(entries) : 0.0;
    // Automatic Hadamard: on while the last agreed window lost anything anywhere, so a clean
    // network pays nothing.
    hadamard_active_ = dropped > 0;
    // A window that lost more than the budget on average, or one call that lost most of its
    // entries, sends the communicator to exact calls for a while. (Single calls that overran a
    // little are the bounded mode doing its job on a busy host; they do not.)
    if (average > options_.loss_budget || worst > std::max(0.5, options_.loss_budget)) {
      reliable_until_ = calls_ + options_.reliable_calls_after_overrun;
      ++agreed_.fallbacks;
      if (rank_ == 0)
        OR_LOG(warn, "loss over budget %.3f (recent average %.4f, worst call %.4f): the next %u calls on this communicator run exactly",
               options_.loss_budget, average, worst, options_.reliable_calls_after_overrun);
    }
  }
  bounded_since_agreement_ = 0;
  window_entries_ = window_dropped_ = window_filled_calls_ = 0;
  window_worst_call_loss_ = 0;
}

CallStats Engine::fail(CallStats stats, TransportStatus ts, Clock::time_point start, std::uint64_t count) {
  if (worker_) worker_->wait_all();  // nothing may write into the caller's buffer after this
  output_ = nullptr;
  in_call_ = false;
  probing_ = false;
  stats.status = ts == TransportStatus::timeout ? CallStatus::timeout : CallStatus::transport_error;
  broken_ = true;
  OR_LOG(error,
         "allreduce of %llu floats (call %llu, %s) failed: %s; missing %llu gathered chunks, %u of %u own chunks "
         "reduced, %llu messages rejected, early store %zu",
         static_cast<unsigned long long>(count), static_cast<unsigned long long>(epoch_), to_string(stats.kind),
         to_string(stats.status), static_cast<unsigned long long>(gather_remaining_), reduced_chunks_,
         layout_.chunks_in_shard(rank_), static_cast<unsigned long long>(rejects_.total()), early_.size());
  stats.latency_us = us_since(start);
  last_call_ = stats;
  return stats;
}

TransportStatus Engine::send_chunk(int peer, Phase phase, const Extent& extent, std::uint16_t flags) {
  WireHeader h;
  h.phase = phase;
  h.flags = flags;
  h.source = static_cast<std::uint32_t>(rank_);
  h.comm_id = comm_id_;
  h.epoch = epoch_;
  h.total = layout_.total();
  h.offset = extent.offset;
  h.length = extent.length;
  h.stamp_scatter = my_estimate_us_[0];
  h.stamp_gather = my_estimate_us_[1];
  auto& header = current_->headers.at(headers_used_++);
  encode(h, header);
  const float* base = phase == Phase::scatter_reduce ? scatter_source_ : current_->data.data();
  const auto* payload = extent.length ? reinterpret_cast<const std::byte*>(base + extent.offset) : nullptr;
  const TransportStatus ts = transport_->send(peer, header, {payload, extent.length * sizeof(float)});
  if (ts == TransportStatus::ok) ++posted_[peer];
  return ts;
}

void Engine::note_stamps(const WireHeader& h) {
  // One stamp per sender and phase per call, so a chatty sender does not outvote the others.
  const float values[kTarPhases] = {h.stamp_scatter, h.stamp_gather};
  for (std::size_t p = 0; p < kTarPhases; ++p) {
    auto& seen = stamped_[p * ranks_ + h.source];
    if (seen || !(values[p] > 0)) continue;
    seen = 1;
    stamps_[p].push_back(values[p]);
  }
}

void Engine::on_message(const InboundMessage& message) {
  WireHeader h;
  if (decode(message.header, h) != DecodeError::none) {
    ++rejects_.malformed;
    return;
  }
  // The transport's own idea of the sender (authenticated, for datagrams) must match the header's.
  if (h.comm_id != comm_id_ || h.source >= static_cast<std::uint32_t>(ranks_) || h.source == static_cast<std::uint32_t>(rank_) ||
      (message.source >= 0 && h.source != static_cast<std::uint32_t>(message.source))) {
    ++rejects_.foreign;
    return;
  }
  if (h.phase == Phase::done) {
    // Late "done"s are normal once our sends drained; only the current call's matter.
    if (h.epoch == epoch_ && h.length == 0) done_from_[h.source] = 1;
    return;
  }
  // Between calls (and after this one closed) nothing may land: the caller's buffer is theirs.
  if (h.epoch < epoch_ || (h.epoch == epoch_ && !in_call_)) {
    ++rejects_.stale;
    return;
  }
  if (h.epoch > epoch_) {
    // A peer already in a later call. In exact mode it can be at most one call ahead (it needs
    // this rank's data to finish the current one); in bounded mode a few. Memory is bounded.
    const std::size_t budget = std::max(kMinEarlyBudget, 2 * largest_call_bytes_);
    if (h.epoch > epoch_ + kEarlyEpochs || early_bytes_ + message.payload_size > budget) {
      ++rejects_.overflow;
      return;
    }
    EarlyMessage early{h, std::vector<std::byte>(message.payload_size)};
    if (!message.receive_into(early.payload)) return;
    early_bytes_ += early.payload.size();
    early_.push_back(std::move(early));
    return;
  }
  note_stamps(h);
  apply(h, message.payload_size, message.receive_into);
}

void Engine::apply(const WireHeader& h, std::size_t payload_size, const PayloadReader& receive) {
  if (h.phase == Phase::missing) return apply_missing(h, payload_size, receive);
  if (h.total != layout_.total() || payload_size != static_cast<std::size_t>(h.length) * sizeof(float)) {
    ++rejects_.misplaced;
    return;
  }
  const int source = static_cast<int>(h.source);
  const std::size_t phase = h.phase == Phase::scatter_reduce ? 0 : 1;
  if (h.last_slice()) last_slice_seen_[phase * ranks_ + source] = 1;
  if (bounded_call_ && !probing_ && options_.faults.drop > 0 &&
      std::uniform_real_distribution<double>(0, 1)(fault_rng_) < options_.faults.drop) {
    ++agreed_.injected_drops;
    return;
  }
  if (h.phase == Phase::scatter_reduce) {
    const auto c = layout_.chunk_index(rank_, h.offset, h.length);
    if (!c) {
      ++rejects_.misplaced;
      return;
    }
    auto& seen = scatter_seen_[static_cast<std::size_t>(source) * contributors_.size() + *c];
    if (seen) {
      ++rejects_.duplicate;
      return;
    }
    if (contributors_[*c] == static_cast<std::uint16_t>(-1)) {
      ++rejects_.stale;  // the chunk was closed at the deadline without it
      return;
    }
    const int slot = source < rank_ ? source : source - 1;
    float* dst = slots_.data() + slot * slot_stride_ + (h.offset - layout_.shard_begin(rank_));
    if (!receive({reinterpret_cast<std::byte*>(dst), payload_size})) return;
    seen = 1;
    ++scatter_received_;
    last_arrival_[0] = Clock::now();
    if (++contributors_[*c] == ranks_ - 1) ready_.push_back(*c);
  } else {
    const auto c = layout_.chunk_index(source, h.offset, h.length);
    if (!c) {
      ++rejects_.misplaced;
      return;
    }
    auto& seen = gather_seen_[static_cast<std::size_t>(source) * layout_.max_chunks() + *c];
    if (seen) {
      ++rejects_.duplicate;
      return;
    }
    // Straight into place: receive_into completes before it returns, so nothing can write into
    // the caller's buffer after this call has returned. An owner whose deadline passed without
    // this rank's contribution may answer before this rank's encode of that shard is done.
    await_encoded(static_cast<int>(source));
    if (!receive({reinterpret_cast<std::byte*>(gather_target() + h.offset), payload_size})) return;
    seen = 1;
    --gather_remaining_;
    last_arrival_[1] = Clock::now();
    if (--gather_pending_[source] == 0 && transformed_ && worker_) start_decode(static_cast<int>(source));
    if (h.partial()) {
      dropped_entries_ += h.length;
      counted_[global_chunk(source, *c)] = 1;
    }
  }
}

void Engine::reduce_chunk(std::uint32_t chunk) {
  await_encoded(rank_);
  const Extent e = layout_.chunk(rank_, chunk);
  const std::uint64_t rel = e.offset - layout_.shard_begin(rank_);
  float* own = current_->data.data() + e.offset;
  const int contributors = 1 + contributors_[chunk];
  const bool partial = contributors < ranks_;
  const std::size_t seen_base = chunk;
  auto has = [&](int p) {
    return p == rank_ || scatter_seen_[static_cast<std::size_t>(p) * contributors_.size() + seen_base];
  };
  // Sum by source rank, never by arrival order, so results do not change from run to run.
  // A chunk held from k of N contributors is scaled by N/k: unbiased for the sum.
  const float scale = partial ? static_cast<float>(ranks_) / static_cast<float>(contributors) : 1.0f;
  constexpr std::uint32_t kBlock = 1024;
  float acc[kBlock];
  for (std::uint32_t b = 0; b < e.length; b += kBlock) {
    const std::uint32_t n = std::min(kBlock, e.length - b);
    bool first = true;
    for (int p = 0; p < ranks_; ++p) {
      if (!has(p)) continue;
      const float* src = p == rank_ ? own + b : slots_.data() + (p < rank_ ? p : p - 1) * slot_stride_ + rel + b;
      if (first) std::memcpy(acc, src, n * sizeof(float));
      else
        for (std::uint32_t i = 0; i < n; ++i) acc[i] += src[i];
      first = false;
    }
    if (partial)
      for (std::uint32_t i = 0; i < n; ++i) acc[i] *= scale;
    std::memcpy(own + b, acc, n * sizeof(float));
  }
  if (!transformed_) std::memcpy(output_ + e.offset, own, e.length * sizeof(float));
  if (partial) {
    dropped_entries_ += e.length;
    counted_[global_chunk(rank_, chunk)] = 1;
  }
  contributors_[chunk] = static_cast<std::uint16_t>(-1);  // closed: later contributions are stale
  ++reduced_chunks_;
  if (transformed_ && worker_ && own_shard_reduced()) start_decode(rank_);

  // Chunks are reduced in the order their contributions complete, so "last" are the last ones
  // reduced, not the highest indices.
  std::uint16_t flags = reduced_chunks_ + last_slices_ > layout_.chunks_in_shard(rank_) ? WireHeader::kFlagLastSlice : 0;
  if (partial) flags |= WireHeader::kFlagPartial;
  for (int k = 1; k < ranks_; ++k) {
    const int peer = rotation_peer(rank_, ranks_, k);
    if (send_chunk(peer, Phase::all_gather, e, flags) == TransportStatus::error)
      OR_LOG(warn, "all-gather send to rank %d failed", peer);
  }
}

void Engine::close_scatter_phase() {
  // Deadline: reduce every own chunk with what it has.
  for (std::uint32_t c = 0; c < layout_.chunks_in_shard(rank_); ++c)
    if (contributors_[c] != static_cast<std::uint16_t>(-1)) reduce_chunk(c);
  ready_.clear();
}

void Engine::fill_missing_gather_chunks() {
  for (int p = 0; p < ranks_; ++p) {
    if (p == rank_) continue;
    for (std::uint32_t c = 0; c < layout_.chunks_in_shard(p); ++c) {
      auto& seen = gather_seen_[static_cast<std::size_t>(p) * layout_.max_chunks() + c];
      if (seen) continue;
      seen = 1;  // closed: a late copy must not overwrite the fill (or land after decoding)
      const Extent e = layout_.chunk(p, c);
      float* dst = gather_target() + e.offset;
      if (options_.fill == FillPolicy::zero) {
        std::memset(dst, 0, e.length * sizeof(float));
      } else {
        // This rank's own contribution times N: an unbiased guess of the sum. Staging still
        // holds it, as nothing arrived to overwrite it.
        const float* own = current_->data.data() + e.offset;
        const auto n = static_cast<float>(ranks_);
        for (std::uint32_t i = 0; i < e.length; ++i) dst[i] = own[i] * n;
      }
      dropped_entries_ += e.length;
      filled_entries_ += e.length;
    }
  }
  gather_remaining_ = 0;
}

bool Engine::agree_on_missing(Clock::time_point deadline) {
  auto& mine = current_->missing;
  mine.assign(missing_bytes_, std::byte{0});
  for (int p = 0; p < ranks_; ++p) {
    if (p == rank_) continue;
    for (std::uint32_t c = 0; c < layout_.chunks_in_shard(p); ++c)
      if (!gather_seen_[static_cast<std::size_t>(p) * layout_.max_chunks() + c]) {
        const std::uint64_t g = global_chunk(p, c);
        mine[g / 8] |= std::byte{static_cast<unsigned char>(1u << (g % 8))};
      }
  }
  for (std::size_t i = 0; i < missing_bytes_; ++i) union_missing_[i] |= mine[i];
  // Each piece goes twice: on a network that loses a fraction p of the messages, an agreement
  // then fails with about (N-1) p^2 instead of (N-1) p; the copy is one small message.
  for (int copy = 0; copy < kMissingCopies; ++copy)
  for (int k = 1; k < ranks_; ++k) {
    const int peer = rotation_peer(rank_, ranks_, k);
    for (std::size_t at = 0; at < missing_bytes_; at += missing_piece_bytes_) {
      WireHeader h;
      h.phase = Phase::missing;
      h.source = static_cast<std::uint32_t>(rank_);
      h.comm_id = comm_id_;
      h.epoch = epoch_;
      h.total = layout_.total();
      h.offset = at;
      h.length = static_cast<std::uint32_t>(std::min(missing_piece_bytes_, missing_bytes_ - at));
      auto& header = current_->headers.at(headers_used_++);
      encode(h, header);
      if (transport_->send(peer, header, {mine.data() + at, h.length}) == TransportStatus::ok) ++posted_[peer];
    }
  }
  const bool complete = wait_until(deadline, [&] { return missing_complete_ == static_cast<std::size_t>(ranks_ - 1); },
                                   true) == TransportStatus::ok &&
                        missing_complete_ == static_cast<std::size_t>(ranks_ - 1);
  // Close the union here too: a chunk another rank lacks is filled on every rank, even where it
  // arrived (and on its owner), so results stay identical. Counted as dropped where it is done.
  // A shard decoded meanwhile by the worker is decoded again if its data changes here.
  if (worker_) worker_->wait_all();
  for (int p = 0; p < ranks_; ++p)
    for (std::uint32_t c = 0; c < layout_.chunks_in_shard(p); ++c) {
      const std::uint64_t g = global_chunk(p, c);
      if ((union_missing_[g / 8] & std::byte{static_cast<unsigned char>(1u << (g % 8))}) == std::byte{0}) continue;
      if (p != rank_) {
        auto& seen = gather_seen_[static_cast<std::size_t>(p) * layout_.max_chunks() + c];
        if (!seen) continue;  // this rank lacks it too: fill_missing_gather_chunks() fills and counts it
        seen = 1;
      }
      const Extent e = layout_.chunk(p, c);
      std::memset(gather_target() + e.offset, 0, e.length * sizeof(float));
      decoded_[p] = 0;
      filled_entries_ += e.length;
      if (!counted_[g]) dropped_entries_ += e.length;  // a partial chunk was counted already
      counted_[g] = 1;
    }
  return complete;
}

void Engine::apply_missing(const WireHeader& h, std::size_t payload_size, const PayloadReader& receive) {
  const std::size_t piece = missing_piece_bytes_ ? h.offset / missing_piece_bytes_ : 0;
  if (h.total != layout_.total() || !bounded_call_ || h.offset % missing_piece_bytes_ != 0 ||
      piece >= missing_pieces_per_rank_ || payload_size != h.length ||
      h.length != std::min(missing_piece_bytes_, missing_bytes_ - h.offset)) {
    ++rejects_.misplaced;
    return;
  }
  auto& seen = missing_pieces_[static_cast<std::size_t>(h.source) * missing_pieces_per_rank_ + piece];
  if (seen) return;  // the second copy (kMissingCopies)
  std::vector<std::byte> bits(payload_size);
  if (!receive(bits)) return;
  seen = 1;
  for (std::size_t i = 0; i < bits.size(); ++i) union_missing_[h.offset + i] |= bits[i];
  bool whole = true;
  for (std::size_t k = 0; k < missing_pieces_per_rank_; ++k)
    whole = whole && missing_pieces_[static_cast<std::size_t>(h.source) * missing_pieces_per_rank_ + k];
  if (whole) ++missing_complete_;
}

HadamardOptions Engine::hadamard_options() const {
  HadamardOptions h;
  h.block_log2 = options_.hadamard_block_log2;
  return h;
}

std::uint64_t Engine::shard_seed(int p) const { return hadamard_seed(comm_id_, epoch_, static_cast<std::uint64_t>(p)); }

void Engine::encode_shard(const float* input, int p) {
  hadamard_encode(input + layout_.shard_begin(p), current_->data.data() + layout_.shard_begin(p), layout_.shard_size(p),
                  shard_seed(p), hadamard_options());
}

void Engine::decode_into_output(int p) const {
  hadamard_decode(current_->data.data() + layout_.shard_begin(p), output_ + layout_.shard_begin(p), layout_.shard_size(p),
                  shard_seed(p), hadamard_options());
}

void Engine::decode_shard(int p) {
  if (decoded_[p]) return;
  decoded_[p] = 1;
  decode_into_output(p);
}

void Engine::start_decode(int p) {
  if (decoded_[p]) return;
  decoded_[p] = 1;
  worker_->submit([this, p] { decode_into_output(p); });
}

void Engine::await_encoded(int p) {
  if (encoded_[p] == 0) return;
  worker_->wait(encoded_[p]);
  encoded_[p] = 0;
}

bool Engine::peers_served() const {
  for (int p = 0; p < ranks_; ++p)
    if (p != rank_ && !done_from_[p] && transport_->sends_in_flight(p) != 0) return false;
  return true;
}


}  // namespace optireduce
