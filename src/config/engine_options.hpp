// What an engine is told at creation: the validated settings that shape its calls.
#pragma once

#include <chrono>
#include <cstdint>

#include "optireduce/engine/config/defaults.hpp"
#include "optireduce/transport_module.hpp"

namespace optireduce {

// What a rank writes for an all-gather chunk that never arrived.
enum class FillPolicy { zero, local };

// When bounded calls run in the randomized Hadamard domain (hadamard/hadamard.hpp).
enum class HadamardMode { off, on, automatic };  // automatic: while the communicator loses data

// Whether a communicator over several hosts with several ranks on some host runs its calls in
// three stages (hierarchy/shape.hpp): automatic where the placement calls for it.
enum class HierarchyMode { automatic, off };

// Which transport carries the engine's messages.
enum class TransportKind { automatic, ucx, udp, ofi };
const char* to_string(TransportKind kind);

// Test and benchmark faults; they act on bounded calls only (exact calls are exact by definition).
struct FaultOptions {
  double drop = 0;               // probability that a received chunk is discarded
  int delay_rank = -1;           // this rank enters bounded calls late...
  double delay_ms = 0;           // ...by this much...
  double delay_probability = 0;  // ...with this probability per call
  int stall_rank = -1;           // this rank stops as it gives up on a call, before its notice leaves...
  double stall_ms = 0;           // ...for this long
  std::uint64_t seed = defaults::kFaultSeed;
  bool any() const {
    return drop > 0 || (delay_rank >= 0 && delay_ms > 0 && delay_probability > 0) || (stall_rank >= 0 && stall_ms > 0);
  }
};

struct EngineOptions {
  std::uint32_t chunk_elems = defaults::kChunkBytes / sizeof(float);
  std::chrono::milliseconds timeout{defaults::kTimeoutMs};    // hard cap on a bounded call
  std::chrono::milliseconds watchdog{defaults::kWatchdogMs};  // exact waits, connecting
  unsigned calibration_calls = defaults::kCalibrationCalls;  // exact calls per size class before deadlines apply
  double loss_budget = defaults::kLossBudget;                 // beyond it: the next calls run exactly for a while
  unsigned reliable_calls_after_overrun = defaults::kReliableCallsAfterOverrun;
  unsigned sync_interval = defaults::kSyncInterval;
  FillPolicy fill = FillPolicy::zero;
  // Bounded calls end with the ranks exchanging which all-gather chunks they lack, so every rank
  // fills the union alike and results stay identical (zero fill only: a local fill differs by
  // rank by nature).
  bool agree_fill = true;
  // Whether bounded calls agree on their fill: asked for, and a zero fill.
  bool fill_agreed() const { return agree_fill && fill == FillPolicy::zero; }
  // Over a transport that may lose data: how often a bounded call's phase asks each sender again
  // for the chunks it lacks, within its deadline (tar/resend.hpp); 0: never.
  unsigned resend_rounds = defaults::kResendRounds;
  HadamardMode hadamard = HadamardMode::automatic;
  unsigned hadamard_block_log2 = defaults::kHadamardBlockLog2;
  // Encode and decode on a second thread while this one drives the network (results are the
  // same either way). The caller decides, once, from the host (tar/hadamard_pipeline.hpp).
  bool hadamard_overlap = false;
  FaultOptions faults;
  TransportKind transport = TransportKind::automatic;
  HierarchyMode hierarchy = HierarchyMode::automatic;
  // The communicator's calls may be bounded (its mode at creation): only then is a datagram
  // transport started beside UCX.
  bool bounded_calls = true;
  // Within one host over shared memory, measure the MPI's allreduce against the engine per size
  // class and let the faster carry the class (deadlines/step_aside.hpp).
  bool step_aside = true;
  TransportSettings transport_settings;
};

}  // namespace optireduce
