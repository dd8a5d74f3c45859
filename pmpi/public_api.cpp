// The public C API of include/optireduce/optireduce.h.
#include <mpi.h>

#include "optireduce/optireduce.h"

#include "comm_engines.hpp"
#include "runtime.hpp"
#include "optireduce/engine/report/stats.hpp"

#define OR_STR2(x) #x
#define OR_STR(x) OR_STR2(x)

extern "C" {

const char* optireduce_version(void) {
  return OR_STR(OPTIREDUCE_VERSION_MAJOR) "." OR_STR(OPTIREDUCE_VERSION_MINOR) "." OR_STR(
      OPTIREDUCE_VERSION_PATCH);
}

int optireduce_get_process_stats(optireduce_process_stats* out) {
  if (!out) return -1;
  const auto s = optireduce::ProcessStats::instance().snapshot();
  out->intercepted_calls = s.intercepted_calls;
  out->passthrough_calls = s.passthrough_calls;
  out->bytes_reduced = s.bytes_reduced;
  out->entries_reduced = s.entries_reduced;
  out->entries_dropped = s.entries_dropped;
  out->dropped_fraction = s.dropped_fraction();
  out->engines_created = s.engines_created;
  out->engine_failures = s.engine_failures;
  out->bounded_calls = s.bounded_calls;
  out->fallback_calls = s.fallback_calls;
  return 0;
}

int optireduce_comm_last_call(MPI_Comm comm, optireduce_call_stats* out) {
  using namespace optireduce;
  if (!out || !pmpi::initialized() || comm == MPI_COMM_NULL) return -1;
  *out = {};
  pmpi::CommState& state = pmpi::comm_state(comm);
  std::lock_guard lock(state.snapshot_mutex);
  const CallStats& c = state.last_call;
  if (c.sequence == 0) return 0;
  out->sequence = c.sequence;
  out->entries = c.entries;
  out->dropped_entries = c.dropped_entries;
  out->filled_entries = c.filled_entries;
  out->dropped_fraction = c.entries ? double(c.dropped_entries) / double(c.entries) : 0.0;
  out->latency_us = c.latency_us;
  for (int p = 0; p < 2; ++p) {
    out->deadline_us[p] = c.deadline_us[p];
    out->phase_us[p] = c.phase_us[p];
  }
  out->kind = static_cast<int>(c.kind);
  out->ok = c.ok() ? 1 : 0;
  out->divergent_calls = state.agreed.divergent_calls;
  out->fallbacks = state.agreed.fallbacks;
  return 0;
}

int optireduce_comm_last_call_f(int fortran_comm, optireduce_call_stats* out) {
  return optireduce_comm_last_call(PMPI_Comm_f2c(static_cast<MPI_Fint>(fortran_comm)), out);
}

}  // extern "C"
