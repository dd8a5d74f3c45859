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
  // Seeds from here on put several ranks on some hosts (three-stage calls: each host's ranks
  // share memory, the faults are those of the network between hosts); below it every rank has a
  // host of its own, as every seed had before (their schedules are what they were).
  static constexpr std::uint64_t kPlacedSeeds = 1000000;

  std::uint64_t seed = 0;
  int ranks = 2;
  // The host of every rank (numbered by their lowest rank), for seeds from kPlacedSeeds on: 2 or
  // 3 hosts of 1 to 4 ranks, at most 6 in all, some host with several; filled in order, or now and
  // then round robin (reduce-scatters then stay flat). Empty: a host per rank.
  std::vector<int> host_of_rank;
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

  bool placed() const { return !host_of_rank.empty(); }
  int host_of(int rank) const { return placed() ? host_of_rank[static_cast<std::size_t>(rank)] : rank; }
  int hosts() const;

  static FaultSchedule draw(std::uint64_t seed);
  // A placed seed's hosts (from a stream of its own), which set the number of ranks.
  void draw_placement();
  // A placed seed's faults between ranks of one host move between hosts (no loss inside a host;
  // an outage there cuts a link to the next host instead).
  void keep_faults_between_hosts();
  // Drawn last for a placed seed, from a stream of its own: more bounded float32 allreduces of
  // the sizes its first calls calibrated, and a rank of a host with several entering a call up to
  // 6 s late (past the call's watchdog: its host's reduce-scatter fails without it).
  void draw_host_faults();
  // The calls of other shapes (and their late entries), appended: a seed's float32 allreduces
  // and faults are what they were before these were drawn.
  void draw_other_shapes();
  std::string describe() const;
};

}  // namespace optireduce::schedules
