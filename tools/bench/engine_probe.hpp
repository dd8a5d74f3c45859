// What OptiReduce did with each call of optireduce-bench, read through its C API.
//
// The bench is a plain MPI program: it is not linked to the library, so the same binary measures
// Open MPI (run as is) and OptiReduce (run with LD_PRELOAD). When the library is loaded, its C
// API is found with dlsym(RTLD_DEFAULT); otherwise every call is of kind "none" (not the engine).
#ifndef OPTIREDUCE_TOOLS_BENCH_ENGINE_PROBE_HPP
#define OPTIREDUCE_TOOLS_BENCH_ENGINE_PROBE_HPP

#include <mpi.h>

#include <dlfcn.h>

#include <array>
#include <cstdint>

#include "optireduce/optireduce.h"

namespace optireduce::bench {

// Kinds of a call, as counted in the JSON ("none": the call did not run through the engine:
// Open MPI, Gloo, or a call the library passed to PMPI_Allreduce).
enum Kind : int { kNone = 0, kExact, kCalibration, kBounded, kFallback, kMpi, kKinds };
inline const char* kind_name(int k) {
  static const char* const names[kKinds] = {"none", "exact", "calibration", "bounded", "fallback", "mpi"};
  return k >= 0 && k < kKinds ? names[k] : "unknown";
}

struct CallInfo {
  int kind = kNone;
  std::uint64_t entries = 0;          // result entries the engine reduced (0 when kind none)
  std::uint64_t dropped_entries = 0;  // of those, lacking a contribution on this rank
};

class EngineProbe {
 public:
  EngineProbe()
      : stats_(reinterpret_cast<StatsFn>(dlsym(RTLD_DEFAULT, "optireduce_get_process_stats"))),
        last_call_(reinterpret_cast<LastCallFn>(dlsym(RTLD_DEFAULT, "optireduce_comm_last_call"))),
        version_(reinterpret_cast<VersionFn>(dlsym(RTLD_DEFAULT, "optireduce_version"))) {}

  bool loaded() const { return stats_ != nullptr && last_call_ != nullptr; }
  const char* version() const { return version_ ? version_() : ""; }

  // Right after an MPI_Allreduce on comm: the engine ran it when the communicator's call sequence
  // moved. Reading the last call's record is a lock and a copy, cheap enough to do between the
  // buckets of a timed step.
  CallInfo after_call(MPI_Comm comm) {
    CallInfo info;
    if (!loaded()) return info;
    Padded<optireduce_call_stats> s;
    if (last_call_(comm, &s.value) != 0 || s.value.sequence == 0 || s.value.sequence == last_sequence_) return info;
    last_sequence_ = s.value.sequence;
    switch (s.value.kind) {
      case OPTIREDUCE_CALL_EXACT: info.kind = kExact; break;
      case OPTIREDUCE_CALL_CALIBRATION: info.kind = kCalibration; break;
      case OPTIREDUCE_CALL_BOUNDED: info.kind = kBounded; break;
      case OPTIREDUCE_CALL_FALLBACK: info.kind = kFallback; break;
      case OPTIREDUCE_CALL_MPI: info.kind = kMpi; break;
      default: info.kind = kExact;  // a kind this header does not know: treat it as one that must be exact
    }
    info.entries = s.value.entries;
    info.dropped_entries = s.value.dropped_entries;
    return info;
  }

  optireduce_process_stats process_stats() const {
    Padded<optireduce_process_stats> s;
    if (stats_) stats_(&s.value);
    return s.value;
  }

 private:
  using StatsFn = int (*)(optireduce_process_stats*);
  using LastCallFn = int (*)(MPI_Comm, optireduce_call_stats*);
  using VersionFn = const char* (*)();

  // The library fills the whole struct of its own header, which may have grown fields at the end
  // since this binary was built: give it room, and read only the fields this header knows.
  template <typename T>
  struct Padded {
    T value{};
    std::array<unsigned char, 1024> room{};
  };

  StatsFn stats_;
  LastCallFn last_call_;
  VersionFn version_;
  std::uint64_t last_sequence_ = 0;
};

}  // namespace optireduce::bench

#endif
