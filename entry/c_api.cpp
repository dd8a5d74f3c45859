// The C entry point of include/optireduce/engine.h, and the process-wide part of
// include/optireduce/optireduce.h that every front end exports.
#include <cstring>

#include "optireduce/engine.h"
#include "optireduce/engine/report/stats.hpp"
#include "group_engine.hpp"
#include "process_state.hpp"

#define OR_STR2(x) #x
#define OR_STR(x) OR_STR2(x)

namespace {

// The C API's numbering of collectives and formats is the engine's.
static_assert(OPTIREDUCE_COLLECTIVES == optireduce::kCollectives && OPTIREDUCE_FORMATS == optireduce::kElementFormats);
static_assert(OPTIREDUCE_COLLECTIVE_REDUCE_SCATTER == static_cast<int>(optireduce::Collective::reduce_scatter));
static_assert(OPTIREDUCE_FORMAT_BFLOAT16 == static_cast<int>(optireduce::ElementFormat::bfloat16));

bool usable(const optireduce_bootstrap* b) {
  return b && b->allgather && b->allreduce_sum && b->ranks > 0 && b->rank >= 0 && b->rank < b->ranks &&
         (b->start_allgather == nullptr) == (b->finish_allgather == nullptr);
}

void copy_text(const std::string& text, char* out, std::size_t bytes) {
  if (!out || bytes == 0) return;
  const std::size_t n = std::min(text.size(), bytes - 1);
  std::memcpy(out, text.data(), n);
  out[n] = '\0';
}

}  // namespace

extern "C" {

const char* optireduce_version(void) {
  return OR_STR(OPTIREDUCE_VERSION_MAJOR) "." OR_STR(OPTIREDUCE_VERSION_MINOR) "." OR_STR(OPTIREDUCE_VERSION_PATCH);
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
  for (std::size_t c = 0; c < optireduce::kCollectives; ++c)
    for (std::size_t f = 0; f < optireduce::kElementFormats; ++f)
      out->intercepted_by_operation[c][f] = s.intercepted_by_shape[c * optireduce::kElementFormats + f];
  return 0;
}

int optireduce_init(const optireduce_bootstrap* world, uint32_t flags, uint32_t* all_flags, char* error,
                    size_t error_bytes) {
  copy_text("", error, error_bytes);
  if (!usable(world)) {
    copy_text("optireduce_init: the bootstrap lacks allgather or allreduce_sum, or its rank is out of range", error, error_bytes);
    return OPTIREDUCE_INVALID;
  }
  optireduce::entry::CallbackBootstrap bootstrap(*world);
  bool mine = false;
  const std::string why = optireduce::entry::init_process_state(bootstrap, flags, all_flags, &mine);
  if (why.empty()) return OPTIREDUCE_OK;
  // Only the rank a line is about says it: every rank would print it.
  if (mine) copy_text(why, error, error_bytes);
  return OPTIREDUCE_INVALID;
}

int optireduce_finalize(const optireduce_bootstrap* world) {
  if (!usable(world)) return OPTIREDUCE_INVALID;
  optireduce::entry::CallbackBootstrap bootstrap(*world);
  return optireduce::entry::finalize_process_state(bootstrap) ? OPTIREDUCE_OK : OPTIREDUCE_INVALID;
}

void optireduce_record_passthrough(int reason, double elapsed_us) {
  optireduce_record_passthrough_of(OPTIREDUCE_COLLECTIVE_ALLREDUCE, reason, elapsed_us);
}

void optireduce_record_passthrough_of(int collective, int reason, double elapsed_us) {
  if (reason < 0 || reason >= static_cast<int>(optireduce::kPassReasons)) return;
  if (collective < 0 || collective >= static_cast<int>(optireduce::kCollectives)) return;
  optireduce::ProcessStats::instance().record_passthrough(static_cast<optireduce::PassReason>(reason), elapsed_us,
                                                          static_cast<optireduce::Collective>(collective));
}

optireduce_engine* optireduce_engine_open(const optireduce_bootstrap* group) {
  if (!usable(group) || !optireduce::entry::process_state_open()) return nullptr;
  return new optireduce_engine(*group);
}

void optireduce_engine_close(optireduce_engine* engine) { delete engine; }

int optireduce_engine_set_mode(optireduce_engine* engine, const char* mode) {
  if (!engine || !mode) return OPTIREDUCE_INVALID;
  const std::string m = mode;
  if (m == "bounded") engine->group.set_mode(optireduce::Mode::bounded);
  else if (m == "reliable") engine->group.set_mode(optireduce::Mode::reliable);
  else if (m == "off") engine->group.set_mode(optireduce::Mode::off);
  else return OPTIREDUCE_INVALID;
  return OPTIREDUCE_OK;
}

int optireduce_engine_allreduce(optireduce_engine* engine, const void* input, void* output, uint64_t count, int format,
                                int op, int* reason) {
  if (!engine) return OPTIREDUCE_INVALID;
  return engine->group.allreduce(input, output, count, format, op, reason);
}

int optireduce_engine_accepts(optireduce_engine* engine, uint64_t count, int format, int op, int* reason) {
  if (!engine) return OPTIREDUCE_INVALID;
  return engine->group.accepts(count, format, op, reason);
}

int optireduce_engine_reduce_scatter(optireduce_engine* engine, const void* input, void* output, const uint64_t* counts,
                                     int format, int op, int* reason) {
  if (!engine) return OPTIREDUCE_INVALID;
  return engine->group.reduce_scatter(input, output, counts, format, op, reason);
}

int optireduce_engine_last_call(optireduce_engine* engine, optireduce_call_stats* out) {
  if (!engine || !out) return -1;
  *out = engine->group.last_call();
  return 0;
}

size_t optireduce_engine_error(optireduce_engine* engine, char* text, size_t bytes) {
  const std::string e = engine ? engine->group.error() : std::string("no engine handle");
  copy_text(e, text, bytes);
  return e.size();
}

}  // extern "C"
