#include "engine.hpp"

#include <algorithm>
#include <cstring>
#include <random>

#include "log.hpp"
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

namespace {

constexpr std::size_t kMinEarlyBudget = 16u << 20;

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

}  // namespace

std::unique_ptr<Engine> Engine::create(int rank, int ranks, std::unique_ptr<Transport> transport,
                                       Bootstrap& bootstrap, const EngineOptions& options, std::string& error) {
  // Blob: [ok][comm nonce, 8 bytes][transport address].
  std::vector<std::byte> blob(9);
  blob[0] = std::byte{static_cast<unsigned char>(transport ? 1 : 0)};
  const std::uint64_t nonce = random_nonce();
  std::memcpy(blob.data() + 1, &nonce, sizeof nonce);
  if (transport) {
    auto address = transport->local_address();
    blob.insert(blob.end(), address.begin(), address.end());
  }
  auto blobs = bootstrap.allgather(blob);
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
  if (!all_ranks_ok(bootstrap, connected, failed)) {
    error = "rank " + std::to_string(failed) + " could not connect to its peers within " +
            std::to_string(options.timeout.count()) + " ms";
    return nullptr;
  }
  return std::unique_ptr<Engine>(new Engine(rank, ranks, comm_id, std::move(transport), options));
}

Engine::Engine(int rank, int ranks, std::uint64_t comm_id, std::unique_ptr<Transport> transport,
               const EngineOptions& options)
    : rank_(rank), ranks_(ranks), comm_id_(comm_id), transport_(std::move(transport)), options_(options) {}

Engine::~Engine() = default;

std::size_t Engine::buffer_bytes() const {
  return (staging_.capacity() + slots_.capacity()) * sizeof(float) + headers_.capacity() * WireHeader::kEncodedSize;
}

void Engine::begin_call(const float* input, float* output, std::uint64_t count) {
  ++epoch_;
  layout_ = ShardLayout(count, ranks_, options_.chunk_elems);
  output_ = output;
  largest_call_bytes_ = std::max<std::size_t>(largest_call_bytes_, count * sizeof(float));

  const std::uint32_t own_chunks = layout_.chunks_in_shard(rank_);
  slot_stride_ = layout_.shard_size(rank_);
  if (staging_.size() < count) staging_.resize(count);
  if (slots_.size() < slot_stride_ * (ranks_ - 1)) slots_.resize(slot_stride_ * (ranks_ - 1));
  std::memcpy(staging_.data(), input, count * sizeof(float));

  contributors_.assign(own_chunks, 0);
  scatter_seen_.assign(static_cast<std::size_t>(ranks_) * own_chunks, 0);
  gather_seen_.assign(static_cast<std::size_t>(ranks_) * layout_.max_chunks(), 0);
  ready_.clear();
  reduced_chunks_ = 0;
  gather_remaining_ = 0;
  done_from_.assign(ranks_, 0);
  for (int p = 0; p < ranks_; ++p)
    if (p != rank_) gather_remaining_ += layout_.chunks_in_shard(p);

  // One header slot per send of this call, sized up front: UCX reads a header until its send
  // completes, so the storage must not move while the call runs.
  const std::size_t sends =
      scatter_schedule(layout_, rank_).size() + static_cast<std::size_t>(own_chunks + 1) * (ranks_ - 1);
  if (headers_.size() < sends) headers_.resize(sends);
  headers_used_ = 0;

  if (ranks_ == 1)
    for (std::uint32_t c = 0; c < own_chunks; ++c) ready_.push_back(c);
}

CallStats Engine::allreduce_sum(const float* input, float* output, std::uint64_t count) {
  const auto start = Clock::now();
  CallStats stats;
  stats.entries = count;
  if (broken_) {
    stats.status = CallStatus::broken;
    return stats;
  }
  const auto deadline = start + options_.timeout;
  auto handler = [this](const InboundMessage& m) { on_message(m); };
  // The previous call's sends read staging and headers, which this call is about to overwrite.
  // They are waited for here rather than at the end of that call: completing a send can need the
  // peer's progress, which it makes once it is in this call too.
  TransportStatus ts = TransportStatus::ok;
  while (!sends_drained()) {
    if (Clock::now() >= deadline) {
      ts = TransportStatus::timeout;
      break;
    }
    if (transport_->poll(deadline, handler) == TransportStatus::error) {
      ts = TransportStatus::error;
      break;
    }
  }
  if (ts != TransportStatus::ok) return fail(stats, ts, start, count);
  begin_call(input, output, count);

  // Early data of this call that arrived while the previous one ran.
  if (!early_.empty()) {
    std::vector<EarlyMessage> pending;
    pending.swap(early_);
    early_bytes_ = 0;
    for (auto& m : pending) {
      if (m.header.epoch == epoch_)
        apply(m.header, m.payload.size(), [&m](std::span<std::byte> dst) {
          std::memcpy(dst.data(), m.payload.data(), dst.size());
          return true;
        });
      else if (m.header.epoch > epoch_) early_.push_back(std::move(m)), early_bytes_ += early_.back().payload.size();
      else ++rejects_.stale;
    }
  }

  const auto schedule = scatter_schedule(layout_, rank_);
  for (std::size_t i = 0; i < schedule.size() && ts == TransportStatus::ok; ++i) {
    const auto& s = schedule[i];
    ts = send_chunk(s.peer, Phase::scatter_reduce, layout_.chunk(s.peer, s.chunk), s.last_slice);
    // After every round of slices, take in what arrived so reduction overlaps sending.
    if ((i + 1) % static_cast<std::size_t>(ranks_ - 1) == 0 && ts == TransportStatus::ok &&
        transport_->poll(Clock::time_point::min(), handler) == TransportStatus::error)
      ts = TransportStatus::error;
  }

  while (ts != TransportStatus::error) {
    while (!ready_.empty()) {
      const std::uint32_t c = ready_.back();
      ready_.pop_back();
      reduce_chunk(c);
    }
    if (call_complete()) {
      for (int k = 1; k < ranks_ && ts == TransportStatus::ok; ++k)
        ts = send_chunk(rotation_peer(rank_, ranks_, k), Phase::done, {0, 0}, true);
      // A send still queued here may need this rank's progress to reach its peer (shared
      // memory FIFOs): keep driving until every peer has our data.
      while (ts == TransportStatus::ok && !peers_served()) {
        if (Clock::now() >= deadline) {
          ts = TransportStatus::timeout;
          break;
        }
        if (transport_->poll(deadline, handler) == TransportStatus::error) ts = TransportStatus::error;
      }
      break;
    }
    if (Clock::now() >= deadline) {
      ts = TransportStatus::timeout;
      break;
    }
    ts = transport_->poll(deadline, handler);
    if (ts == TransportStatus::timeout) ts = TransportStatus::ok;  // loop re-checks the deadline
  }
  output_ = nullptr;
  if (ts != TransportStatus::ok) return fail(stats, ts, start, count);
  stats.latency_us = std::chrono::duration<double, std::micro>(Clock::now() - start).count();
  return stats;
}

CallStats Engine::fail(CallStats stats, TransportStatus ts, Clock::time_point start, std::uint64_t count) {
  output_ = nullptr;
  stats.status = ts == TransportStatus::timeout ? CallStatus::timeout : CallStatus::transport_error;
  broken_ = true;
  OR_LOG(error,
         "allreduce of %llu floats (call %llu) failed: %s; missing %llu gathered chunks, %u of %u own chunks "
         "reduced, %llu messages rejected, early store %zu",
         static_cast<unsigned long long>(count), static_cast<unsigned long long>(epoch_), to_string(stats.status),
         static_cast<unsigned long long>(gather_remaining_), reduced_chunks_, layout_.chunks_in_shard(rank_),
         static_cast<unsigned long long>(rejects_.total()), early_.size());
  stats.latency_us = std::chrono::duration<double, std::micro>(Clock::now() - start).count();
  return stats;
}

TransportStatus Engine::send_chunk(int peer, Phase phase, const Extent& extent, bool last_slice) {
  WireHeader h;
  h.phase = phase;
  h.flags = last_slice ? WireHeader::kFlagLastSlice : 0;
  h.source = static_cast<std::uint32_t>(rank_);
  h.comm_id = comm_id_;
  h.epoch = epoch_;
  h.total = layout_.total();
  h.offset = extent.offset;
  h.length = extent.length;
  auto& slot = headers_.at(headers_used_++);
  encode(h, slot);
  const auto* payload = extent.length ? reinterpret_cast<const std::byte*>(staging_.data() + extent.offset) : nullptr;
  return transport_->send(peer, slot, {payload, extent.length * sizeof(float)});
}

void Engine::on_message(const InboundMessage& message) {
  WireHeader h;
  if (decode(message.header, h) != DecodeError::none) {
    ++rejects_.malformed;
    return;
  }
  if (h.comm_id != comm_id_ || h.source >= static_cast<std::uint32_t>(ranks_) || h.source == static_cast<std::uint32_t>(rank_)) {
    ++rejects_.foreign;
    return;
  }
  if (h.phase == Phase::done) {
    // Late "done"s are normal once our sends drained; only the current call's matter.
    if (h.epoch == epoch_ && h.length == 0) done_from_[h.source] = 1;
    return;
  }
  if (h.epoch < epoch_) {
    ++rejects_.stale;
    return;
  }
  if (h.epoch > epoch_) {
    // A peer already in the next call. In exact mode a peer can be at most one call ahead (it
    // needs this rank's data to finish the current one); the store is bounded all the same.
    const std::size_t budget = std::max(kMinEarlyBudget, 2 * largest_call_bytes_);
    if (h.epoch != epoch_ + 1 || early_bytes_ + message.payload_size > budget) {
      ++rejects_.overflow;
      return;
    }
    EarlyMessage early{h, std::vector<std::byte>(message.payload_size)};
    if (!message.receive_into(early.payload)) return;
    early_bytes_ += early.payload.size();
    early_.push_back(std::move(early));
    return;
  }
  apply(h, message.payload_size, message.receive_into);
}

void Engine::apply(const WireHeader& h, std::size_t payload_size,
                   const std::function<bool(std::span<std::byte>)>& receive) {
  if (h.total != layout_.total() || payload_size != static_cast<std::size_t>(h.length) * sizeof(float)) {
    ++rejects_.misplaced;
    return;
  }
  const int source = static_cast<int>(h.source);
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
    const int slot = source < rank_ ? source : source - 1;
    float* dst = slots_.data() + slot * slot_stride_ + (h.offset - layout_.shard_begin(rank_));
    if (!receive({reinterpret_cast<std::byte*>(dst), payload_size})) return;
    seen = 1;
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
    // Straight into the caller's buffer: receive_into completes before it returns, so nothing
    // can write there after this call has returned.
    if (!receive({reinterpret_cast<std::byte*>(output_ + h.offset), payload_size})) return;
    seen = 1;
    --gather_remaining_;
  }
}

void Engine::reduce_chunk(std::uint32_t chunk) {
  const Extent e = layout_.chunk(rank_, chunk);
  const std::uint64_t rel = e.offset - layout_.shard_begin(rank_);
  float* own = staging_.data() + e.offset;
  // Sum by source rank, never by arrival order, so results do not change from run to run.
  constexpr std::uint32_t kBlock = 1024;
  float acc[kBlock];
  for (std::uint32_t b = 0; b < e.length; b += kBlock) {
    const std::uint32_t n = std::min(kBlock, e.length - b);
    for (int p = 0; p < ranks_; ++p) {
      const float* src = p == rank_ ? own + b : slots_.data() + (p < rank_ ? p : p - 1) * slot_stride_ + rel + b;
      if (p == 0) std::memcpy(acc, src, n * sizeof(float));
      else
        for (std::uint32_t i = 0; i < n; ++i) acc[i] += src[i];
    }
    std::memcpy(own + b, acc, n * sizeof(float));
  }
  std::memcpy(output_ + e.offset, own, e.length * sizeof(float));
  ++reduced_chunks_;
  for (int k = 1; k < ranks_; ++k) {
    const int peer = rotation_peer(rank_, ranks_, k);
    if (send_chunk(peer, Phase::all_gather, e, chunk + 1 == layout_.chunks_in_shard(rank_)) == TransportStatus::error)
      OR_LOG(warn, "all-gather send to rank %d failed", peer);
  }
}

bool Engine::call_complete() const {
  return reduced_chunks_ == layout_.chunks_in_shard(rank_) && gather_remaining_ == 0;
}

bool Engine::peers_served() const {
  for (int p = 0; p < ranks_; ++p)
    if (p != rank_ && !done_from_[p] && transport_->sends_in_flight(p) != 0) return false;
  return true;
}

bool Engine::sends_drained() const {
  for (int p = 0; p < ranks_; ++p)
    if (p != rank_ && transport_->sends_in_flight(p) != 0) return false;
  return true;
}

}  // namespace optireduce
