// A group's handle (optireduce_engine of include/optireduce/engine.h): what a front end keeps
// per group (an MPI communicator, a torch process group). Its engine is created inside the
// group's first call that runs it, where every rank is; a call the engine does not take is
// declined with its reason, the same on every rank, and the front end reduces it itself. A
// failed call fails on every rank alike, and the group's later calls are declined.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include "optireduce/engine.h"
#include "optireduce/engine/config/config.hpp"
#include "optireduce/engine/engine/engine.hpp"
#include "callback_bootstrap.hpp"

namespace optireduce::entry {

class GroupEngine {
 public:
  explicit GroupEngine(const optireduce_bootstrap& callbacks);
  // Retires the engine and releases the front end's context.
  ~GroupEngine();
  GroupEngine(const GroupEngine&) = delete;
  GroupEngine& operator=(const GroupEngine&) = delete;

  // optireduce_engine_allreduce and _reduce_scatter: an optireduce_result.
  int allreduce(const void* input, void* output, std::uint64_t count, int format, int op, int* reason);
  int reduce_scatter(const void* input, void* output, const std::uint64_t* counts, int format, int op, int* reason);
  // optireduce_engine_accepts.
  int accepts(std::uint64_t count, int format, int op, int* reason);
  void set_mode(Mode mode);
  // The last call through the engine, as the C API shows it.
  optireduce_call_stats last_call() const;
  std::string error() const;
  // Destroys the engine, keeping what it did for the report; later calls are declined.
  void retire();

 private:
  // The engine, created when first needed (collective: every rank is in the same call). Call
  // with mutex_ held.
  Engine* engine_for_call(const Config& config);
  // What a call of these arguments gets short of running: OPTIREDUCE_OK when it runs. Call with
  // mutex_ held.
  int admit(std::uint64_t count, int format, int op, int* reason) const;
  // Admits a call of `count` elements, runs `call(engine, format, bounded)` and accounts for it
  // (failure, the C API's snapshot, the report, the trace): an optireduce_result.
  template <typename Call>
  int run(std::uint64_t count, int format, int op, int* reason, Call&& call);

  const optireduce_bootstrap callbacks_;
  std::mutex mutex_;  // one call at a time
  std::optional<Mode> mode_;
  bool tried_ = false, failed_ = false, retired_ = false;
  std::unique_ptr<Engine> engine_;
  const CallbackBootstrap* bootstrap_ = nullptr;  // the engine's, while it lives

  // What the C API reads, apart from the call mutex so a monitoring thread never waits for a call.
  mutable std::mutex snapshot_mutex_;
  CallStats last_call_;
  AgreedCounts agreed_;
  std::string error_;
};

}  // namespace optireduce::entry

// The C API's opaque handle.
struct optireduce_engine {
  explicit optireduce_engine(const optireduce_bootstrap& callbacks) : group(callbacks) {}
  optireduce::entry::GroupEngine group;
};
