// How datagrams are joined for the kernel's UDP segmentation offload (GSO: one send carries a
// run of datagrams to one peer) and split after its receive offload (GRO: one buffer holds a run
// of datagrams from one sender). In both, every datagram of a run has the first one's size but
// the last, which may be shorter; each datagram stays a datagram of its own on the wire.
#pragma once

#include <algorithm>
#include <cstddef>
#include <span>

namespace optireduce::udp {

inline constexpr std::size_t kMaxGsoSegments = 64;  // the kernel's UDP_MAX_SEGMENTS on older kernels

// How many of the next `available` datagrams (sizes by `size_at(i)`) one GSO send carries:
// a run as above, at most kMaxGsoSegments, at most `max_bytes` in all. 0 when the first alone
// exceeds `max_bytes`.
template <typename SizeAt>
std::size_t gso_run_length(std::size_t available, SizeAt size_at, std::size_t max_bytes) {
  if (available == 0) return 0;
  const std::size_t segment = size_at(0);
  std::size_t count = 0, total = 0;
  while (count < available && count < kMaxGsoSegments) {
    const std::size_t next = size_at(count);
    if (next > segment || total + next > max_bytes) break;
    total += next;
    ++count;
    if (next < segment) break;  // a shorter datagram ends the run
  }
  return count;
}

// The datagrams of one received buffer; `segment_bytes` 0 (no offload): the buffer is one (an
// empty buffer is one empty datagram).
class GroSegments {
 public:
  GroSegments(std::span<const std::byte> buffer, std::size_t segment_bytes)
      : buffer_(buffer), segment_(segment_bytes ? segment_bytes : buffer.size()) {}

  std::size_t size() const { return buffer_.empty() ? 1 : (buffer_.size() + segment_ - 1) / segment_; }
  std::span<const std::byte> operator[](std::size_t i) const {
    const std::size_t at = i * segment_;
    return buffer_.subspan(at, std::min(segment_, buffer_.size() - at));
  }

 private:
  std::span<const std::byte> buffer_;
  std::size_t segment_;
};

}  // namespace optireduce::udp
