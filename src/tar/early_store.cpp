#include "optireduce/engine/tar/early_store.hpp"

#include <algorithm>

namespace optireduce {

std::uint64_t EarlyStore::budget_of(const WireHeader& h) {
  return std::max<std::uint64_t>(kMinCallBudget, 2 * h.total * sizeof(float));
}

EarlyStore::Buffer EarlyStore::take_buffer(std::size_t size) {
  // The smallest spare that fits: calls of one job bring chunks of a few sizes.
  auto best = spares_.end();
  for (auto it = spares_.begin(); it != spares_.end(); ++it)
    if (it->capacity >= size && (best == spares_.end() || it->capacity < best->capacity)) best = it;
  if (best == spares_.end()) return {std::make_unique_for_overwrite<std::byte[]>(size), size};
  Buffer b = std::move(*best);
  spare_bytes_ -= b.capacity;
  *best = std::move(spares_.back());
  spares_.pop_back();
  return b;
}

void EarlyStore::give_back(Buffer buffer) {
  if (!buffer.data || spare_bytes_ + buffer.capacity > peak_bytes_) return;
  spare_bytes_ += buffer.capacity;
  spares_.push_back(std::move(buffer));
}

bool EarlyStore::keep(const WireHeader& h, std::uint64_t current_epoch, const InboundMessage& message) {
  if (h.epoch <= current_epoch || h.epoch > current_epoch + kMaxEpochsAhead) return false;
  auto it = std::find_if(used_.begin(), used_.end(), [&](const auto& u) { return u.first == h.epoch; });
  if (it == used_.end()) it = used_.insert(used_.end(), {h.epoch, 0});
  if (it->second + message.payload_size > budget_of(h)) return false;
  Message m{h, take_buffer(message.payload_size), message.payload_size};
  if (!message.copy_payload({m.buffer.data.get(), m.size})) {  // the payload could not be had: nothing kept
    give_back(std::move(m.buffer));
    return true;
  }
  it->second += message.payload_size;
  bytes_ += message.payload_size;
  peak_bytes_ = std::max(peak_bytes_, bytes_);
  messages_.push_back(std::move(m));
  return true;
}

void EarlyStore::replay(std::uint64_t epoch, const std::function<void(const WireHeader&, std::span<const std::byte>)>& apply,
                        std::uint64_t& stale) {
  if (messages_.empty()) return;
  replaying_.clear();
  replaying_.swap(messages_);
  bytes_ = 0;
  for (auto& m : replaying_) {
    if (m.header.epoch == epoch) {
      apply(m.header, m.payload());
      give_back(std::move(m.buffer));
    } else if (m.header.epoch > epoch) {
      bytes_ += m.size;
      messages_.push_back(std::move(m));
    } else {
      ++stale;
      give_back(std::move(m.buffer));
    }
  }
  replaying_.clear();
  std::erase_if(used_, [&](const auto& u) { return u.first <= epoch; });
}

}  // namespace optireduce
