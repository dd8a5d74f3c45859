// The shared memory of one communicator's ranks on one host: a POSIX shared-memory object of the
// engine's own, named from the communicator's id and the host, never the network. The host's
// first rank creates it (exclusively: a name in use is an error, never joined), the others open
// it within a deadline; the last to attach removes the name, so nothing is left in /dev/shm once
// every rank holds its mapping (or when creation fails), and the memory goes with the last unmap.
//
// Layout: a header, a line of the host's verdicts, one control line per local rank (its sequence
// counters), then one slot per local rank and one result area, each `slot_bytes` long, 64-byte
// aligned.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "optireduce/status.hpp"
#include "optireduce/transport.hpp"

namespace optireduce {

class HostSegment {
 public:
  // Collective over the host's ranks (each calls it with the same arguments but its local_index).
  static std::unique_ptr<HostSegment> attach(std::uint64_t comm_id, const std::string& host, int local_index,
                                             int local_ranks, std::size_t slot_bytes, Clock::time_point deadline,
                                             Status& status);
  ~HostSegment();
  HostSegment(const HostSegment&) = delete;
  HostSegment& operator=(const HostSegment&) = delete;

  // "/optireduce-<comm id>-<host hash>": what /dev/shm shows while the ranks attach.
  static std::string name_of(std::uint64_t comm_id, const std::string& host);

  int local_ranks() const { return local_ranks_; }
  std::size_t slot_bytes() const { return slot_bytes_; }
  std::byte* slot(int local_index) const;
  std::byte* result() const;
  // A local rank's counter `which` (0: its input is in its slot, 1: its reduced range is in the
  // result, 2: its part of the call failed), the number of the last call that reached that point;
  // 3: the result entries its slices' exchanges left out in its last call; 4: the call of its
  // latest progress mark, 5: that mark's time (steady clock, ns: one clock for the whole host).
  std::atomic<std::uint64_t>& counter(int local_index, int which) const;
  // The host's verdict on stage `stage` (0: reduce-scatter, 1: all-gather) of `call`, two calls
  // kept per stage: 2·call where it succeeded, 2·call + 1 where it failed, less while undecided.
  std::atomic<std::uint64_t>& verdict(int stage, std::uint64_t call) const;

 private:
  HostSegment(std::byte* base, std::size_t bytes, int local_ranks, std::size_t slot_bytes, std::string unlink_at_end)
      : base_(base), bytes_(bytes), local_ranks_(local_ranks), slot_bytes_(slot_bytes), unlink_at_end_(std::move(unlink_at_end)) {}
  std::byte* base_;
  std::size_t bytes_;
  int local_ranks_;
  std::size_t slot_bytes_;
  // The creator removes the name again at the end, in case some rank never attached.
  std::string unlink_at_end_;
};

}  // namespace optireduce
