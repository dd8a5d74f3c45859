// The public C API of include/optireduce/optireduce.h.
#include "optireduce/optireduce.h"

#include "stats.hpp"

#define OPTIREDUCE_STR2(x) #x
#define OPTIREDUCE_STR(x) OPTIREDUCE_STR2(x)

extern "C" {

const char* optireduce_version(void) {
  return OPTIREDUCE_STR(OPTIREDUCE_VERSION_MAJOR) "." OPTIREDUCE_STR(OPTIREDUCE_VERSION_MINOR) "." OPTIREDUCE_STR(
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
  return 0;
}

}  // extern "C"
