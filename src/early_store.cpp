#include "optireduce/engine/early_store.hpp"

#include <algorithm>

namespace optireduce {

std::uint64_t EarlyStore::budget_of(const WireHeader& h) {
  return std::max<std::uint64_t>(kMinCallBudget, 2 * h.total * sizeof(float));
}

bool EarlyStore::keep(const WireHeader& h, std::uint64_t current_epoch, const InboundMessage& message) {
  if (h.epoch <= current_epoch || h.epoch > current_epoch + kMaxEpochsAhead) return false;
  auto it = std::find_if(used_.begin(), used_.end(), [&](const auto& u) { return u.first == h.epoch; });
  if (it == used_.end()) it = used_.insert(used_.end(), {h.epoch, 0});
  if (it->second + message.payload_size > budget_of(h)) return false;
  Message m{h, std::vector<std::byte>(message.payload_size)};
  if (!message.copy_payload(m.payload)) return true;  // the payload could not be had: nothing kept
  it->second += message.payload_size;
  bytes_ += message.payload_size;
  messages_.push_back(std::move(m));
  return true;
}

void EarlyStore::replay(std::uint64_t epoch, const std::function<void(const WireHeader&, std::span<const std::byte>)>& apply,
                        std::uint64_t& stale) {
  if (messages_.empty()) return;
  std::vector<Message> pending;
  pending.swap(messages_);
  bytes_ = 0;
  for (auto& m : pending) {
    if (m.header.epoch == epoch) {
      apply(m.header, m.payload);
    } else if (m.header.epoch > epoch) {
      bytes_ += m.payload.size();
      messages_.push_back(std::move(m));
    } else {
      ++stale;
    }
  }
  std::erase_if(used_, [&](const auto& u) { return u.first <= epoch; });
}

}  // namespace optireduce
