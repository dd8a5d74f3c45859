#include "optireduce/engine/engine/staging_pool.hpp"

namespace optireduce {

bool StagingPool::is_free(const StagingBuffer& b, const Transport& transport) const {
  // Data sends to one peer complete in the order they were posted, so the sends that read `b`
  // are done once at most the sends posted after them are still in flight.
  for (int p = 0; p < ranks_; ++p)
    if (p != rank_ && posted_[p] - transport.sends_in_flight(p) < b.posted_until[p]) return false;
  return true;
}

StagingBuffer* StagingPool::acquire(Transport& transport, bool bounded, std::uint64_t epoch, Clock::time_point deadline,
                                    const Wait& wait, Status& status) {
  auto fresh = [this]() {
    buffers_.push_back(std::make_unique<StagingBuffer>());
    buffers_.back()->posted_until.assign(static_cast<std::size_t>(ranks_), 0);
    return buffers_.back().get();
  };
  if (buffers_.empty()) return fresh();
  // The least recently used free buffer first: it leaves the last call's sends untouched longest.
  for (std::size_t i = 1; i <= buffers_.size(); ++i) {
    StagingBuffer& b = *buffers_[(epoch + i) % buffers_.size()];
    if (is_free(b, transport)) return &b;
  }
  // Another buffer rather than a wait, exact calls too: the last sends of a call (its "done"
  // messages) can still be queued when its peers have finished it, and a peer may need this
  // rank's next call to progress before they leave.
  if (buffers_.size() < kMaxBuffers) return fresh();
  StagingBuffer& b = *buffers_[epoch % buffers_.size()];
  // Datagrams still queued for an earlier call are late by now: drop them rather than wait for
  // a peer that may not read again until this rank joins it in another collective.
  if (bounded && transport.abandon_queued_sends() && is_free(b, transport)) return &b;
  status = wait(deadline, [&] { return is_free(b, transport); });
  return status.ok() ? &b : nullptr;
}

void StagingPool::prepare(StagingBuffer& b, std::uint64_t count, std::size_t sends, int ranks) {
  if (b.data.size() < count) b.data.resize(count);
  if (b.headers.size() < sends) b.headers.resize(sends);
  b.headers_used = 0;
  b.posted_until.assign(static_cast<std::size_t>(ranks), 0);
}

std::size_t StagingPool::bytes() const {
  std::size_t total = 0;
  for (const auto& b : buffers_)
    total += b->data.capacity() * sizeof(float) + b->headers.capacity() * WireHeader::kEncodedSize + b->missing.capacity();
  return total;
}

}  // namespace optireduce
