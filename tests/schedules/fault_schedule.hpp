// A fault schedule drawn from a seed: the job's shape, the calls it makes, and what the datagram
// network and the scheduler do to it (loss of data and control messages, one-direction outages,
// reordering, duplicates, delays, a descheduled rank, a rank entering late, a rank whose bounded
// transport cannot be made). The same seed always gives the same schedule; the network's
// decisions about each message are drawn from the seed and the message's identity, not from the
// order threads happen to send in, so a seed replays as closely as threads allow.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "optireduce/engine/tar/call_shape.hpp"

namespace optireduce::schedules {

struct Outage {
  int from = 0, to = 0;           // one direction of one link
  double start_ms = 0, length_ms = 0;  // job time (from the first call)
  bool control_only = false;      // the data crosses; the words that end a call do not
};

inline constexpr int kEveryRank = -1;

struct Deschedule {
  int rank = 0;  // kEveryRank: every rank's threads at once (a busy host)
  double start_ms = 0, length_ms = 0;  // the rank's thread stops (as SIGSTOP would) in job time
};

struct LateEntry {
  int rank = 0, call = 0;
  double delay_ms = 0;
};

struct PlannedCall {
  std::uint64_t count = 0;  // each rank's input (a reduce-scatter's: the sum of its blocks)
  bool bounded = true;  // false: the caller asks for an exact call
  CallShape shape;      // a float32 allreduce, but for the calls drawn after the rest
  std::vector<std::uint64_t> blocks;  // a reduce-scatter's count per rank (uneven, zeros allowed)
};

// "rs.f32 64+0+130b" (a reduce-scatter of float32 over those blocks, bounded allowed),
// "ar.bf16 300x" (a bfloat16 allreduce of 300 elements, exact asked): one call's shape.
std::string shape_text(const PlannedCall& call);

struct FaultSchedule {
  std::uint64_t seed = 0;
  int ranks = 2;
  unsigned calibration_calls = 1;
  double loss_budget = 0.5;
  unsigned sync_interval = 2;
  unsigned resend_rounds = 2;
  // The first float32_allreduces calls are float32 allreduces; then come 16-bit allreduces and
  // reduce-scatters, drawn from a stream of their own (draw_other_shapes) after everything else.
  std::vector<PlannedCall> calls;
  std::size_t float32_allreduces = 0;
  // Per direction (from * ranks + to): the share of data and control messages lost.
  std::vector<double> data_loss, control_loss;
  double duplicate = 0;       // share of messages delivered twice
  double delayed = 0;         // share of messages held on the way (reordered behind later ones)
  double max_delay_ms = 0;    // how long at most
  std::vector<Outage> outages;
  std::vector<Deschedule> deschedules;
  std::vector<LateEntry> late;
  int no_bounded_transport = -1;  // this rank's bounded transport could not be made
  // A rank stopped as it gives up on a call, before its failure notice leaves (the engine's
  // OPTIREDUCE_FAULT_STALL), for less than its peers wait for that notice.
  int give_up_stall_rank = -1;
  double give_up_stall_ms = 0;

  static FaultSchedule draw(std::uint64_t seed);
  // The calls of other shapes (and their late entries), appended: a seed's float32 allreduces
  // and faults are what they were before these were drawn.
  void draw_other_shapes();
  std::string describe() const;
};

}  // namespace optireduce::schedules
