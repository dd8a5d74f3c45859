// The process's side of the engine, shared by every front end: the settings (parsed and agreed by
// every rank at optireduce_init), the trace, the groups' handles still open and what retired
// engines did; optireduce_finalize writes the report from them.
#pragma once

#include <cstdint>
#include <string>

#include "optireduce/engine/config/config.hpp"
#include "optireduce/engine/engine/engine.hpp"
#include "optireduce/engine/report/call_stats.hpp"
#include "callback_bootstrap.hpp"

namespace optireduce::entry {

class GroupEngine;

// Collective over `world`. "" on success; otherwise why not, the same verdict on every rank: the
// line of the rank it is about (a setting, an output path, settings unlike rank 0's; then
// *mine_failed), on the others one naming that rank.
std::string init_process_state(CallbackBootstrap& world, std::uint32_t flags, std::uint32_t* all_flags, bool* mine_failed);
// Collective over `world`. False when not initialised.
bool finalize_process_state(CallbackBootstrap& world);

// Between init_process_state and finalize_process_state.
bool process_state_open();
// The agreed settings (valid while the process state is open).
const Config& process_config();
// Appends the call to OPTIREDUCE_TRACE when it is set.
void trace_call(const CallStats& call);

// Handles register while they are open, so finalize_process_state can retire their engines.
void register_handle(GroupEngine* handle);
void unregister_handle(GroupEngine* handle);
// Keeps what a retiring engine did for the report.
void remember_engine(const Engine& engine);

}  // namespace optireduce::entry
