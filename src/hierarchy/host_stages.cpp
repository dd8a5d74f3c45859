#include "optireduce/engine/hierarchy/host_stages.hpp"

#include <cstring>
#include <string>
#include <thread>

namespace optireduce {

Status HostStages::wait_all(int which, std::uint64_t call, Clock::time_point deadline, const char* stage) const {
  for (int k = 0; k < segment_.local_ranks(); ++k) {
    unsigned spins = 0;
    while (segment_.counter(k, which).load(std::memory_order_acquire) < call) {
      if (++spins % 1024 == 0) {
        if (Clock::now() >= deadline)
          return Timeout(std::string("local rank ") + std::to_string(k) + " of this host did not reach the " + stage +
                         " of call " + std::to_string(call) + " in time");
        std::this_thread::yield();
      }
    }
  }
  return {};
}

Status HostStages::reduce_scatter(const float* input, std::size_t elements, ElementRange mine, float* reduced,
                                  Clock::time_point deadline) {
  if (elements * sizeof(float) > segment_.slot_bytes())
    return Invalid(std::to_string(elements * sizeof(float)) + " bytes exceed the host's shared slot of " +
                   std::to_string(segment_.slot_bytes()));
  const std::uint64_t call = ++call_;
  OR_RETURN_IF_ERROR(wait_all(1, call - 1, deadline, "end of the previous call"));
  std::memcpy(segment_.slot(me_), input, elements * sizeof(float));
  segment_.counter(me_, 0).store(call, std::memory_order_release);
  OR_RETURN_IF_ERROR(wait_all(0, call, deadline, "reduce-scatter"));
  const auto* first = reinterpret_cast<const float*>(segment_.slot(0));
  for (std::size_t i = mine.begin; i < mine.end; ++i) reduced[i - mine.begin] = first[i];
  for (int k = 1; k < segment_.local_ranks(); ++k) {
    const auto* slot = reinterpret_cast<const float*>(segment_.slot(k));
    for (std::size_t i = mine.begin; i < mine.end; ++i) reduced[i - mine.begin] += slot[i];
  }
  bytes_ += (elements + mine.size() * static_cast<std::size_t>(segment_.local_ranks())) * sizeof(float);
  return {};
}

Status HostStages::all_gather(const float* reduced, ElementRange mine, float* output, std::size_t elements,
                              Clock::time_point deadline, bool failed, std::uint64_t* dropped) {
  auto* result = reinterpret_cast<float*>(segment_.result());
  std::memcpy(result + mine.begin, reduced, mine.size() * sizeof(float));
  if (failed) segment_.counter(me_, 2).store(call_, std::memory_order_relaxed);
  if (dropped) segment_.counter(me_, 3).store(*dropped, std::memory_order_relaxed);
  segment_.counter(me_, 1).store(call_, std::memory_order_release);
  OR_RETURN_IF_ERROR(wait_all(1, call_, deadline, "all-gather"));
  if (dropped) {
    *dropped = 0;
    for (int k = 0; k < segment_.local_ranks(); ++k) *dropped += segment_.counter(k, 3).load(std::memory_order_relaxed);
  }
  for (int k = 0; k < segment_.local_ranks(); ++k)
    if (segment_.counter(k, 2).load(std::memory_order_relaxed) == call_)
      return PeerError("local rank " + std::to_string(k) + " of this host failed its part of call " + std::to_string(call_));
  std::memcpy(output, result, elements * sizeof(float));
  bytes_ += (mine.size() + elements) * sizeof(float);
  return {};
}

}  // namespace optireduce
