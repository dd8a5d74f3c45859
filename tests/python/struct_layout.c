/* Prints the layout of the C API's structs as JSON, for test_package.py to compare with the
 * ctypes mirrors of python/optireduce/_capi.py. */
#include <stddef.h>
#include <stdio.h>

#include "optireduce/optireduce.h"

#define FIELD(type, name) printf("%s\"%s\": [%zu, %zu]", first ? "" : ", ", #name, offsetof(type, name), \
                                 sizeof(((type*)0)->name)), first = 0

int main(void) {
  int first = 1;
  printf("{\"optireduce_process_stats\": {\"size\": %zu, \"fields\": {", sizeof(optireduce_process_stats));
  FIELD(optireduce_process_stats, intercepted_calls);
  FIELD(optireduce_process_stats, passthrough_calls);
  FIELD(optireduce_process_stats, bytes_reduced);
  FIELD(optireduce_process_stats, entries_reduced);
  FIELD(optireduce_process_stats, entries_dropped);
  FIELD(optireduce_process_stats, dropped_fraction);
  FIELD(optireduce_process_stats, engines_created);
  FIELD(optireduce_process_stats, engine_failures);
  FIELD(optireduce_process_stats, bounded_calls);
  FIELD(optireduce_process_stats, fallback_calls);
  FIELD(optireduce_process_stats, intercepted_by_operation);
  first = 1;
  printf("}}, \"optireduce_call_stats\": {\"size\": %zu, \"fields\": {", sizeof(optireduce_call_stats));
  FIELD(optireduce_call_stats, sequence);
  FIELD(optireduce_call_stats, entries);
  FIELD(optireduce_call_stats, dropped_entries);
  FIELD(optireduce_call_stats, filled_entries);
  FIELD(optireduce_call_stats, dropped_fraction);
  FIELD(optireduce_call_stats, latency_us);
  FIELD(optireduce_call_stats, deadline_us);
  FIELD(optireduce_call_stats, phase_us);
  FIELD(optireduce_call_stats, kind);
  FIELD(optireduce_call_stats, ok);
  FIELD(optireduce_call_stats, divergent_calls);
  FIELD(optireduce_call_stats, fallbacks);
  FIELD(optireduce_call_stats, collective);
  FIELD(optireduce_call_stats, format);
  printf("}}}\n");
  return 0;
}
