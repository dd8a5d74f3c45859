// What engines did, kept after they are destroyed (a group freed before the job ends still counts
// in the report).
#pragma once

#include <cstddef>
#include <map>
#include <set>
#include <string>

#include "optireduce/engine/engine/engine.hpp"

namespace optireduce::entry {

struct EngineHistory {
  std::size_t peak_buffer_bytes = 0;
  std::size_t largest_call_bytes = 0;
  unsigned long long rejected_messages = 0;
  unsigned long long divergent_calls = 0;
  unsigned long long fallbacks = 0;
  unsigned long long injected_drops = 0;
  unsigned long long fill_agreement_incomplete = 0;
  unsigned long long calibration_reruns = 0;
  unsigned long long resend_requests = 0, resend_chunks_asked = 0, resent_chunks = 0;
  unsigned long long contributions_added_on_arrival = 0, contributions_waited_in_slot = 0;
  std::set<std::string> transports;
  LateArrivals late;  // what the deadlines did not wait for, summed over engines
  // Rejected messages by reason (the engine's and the transport's), and the transports' own
  // counters, summed over engines; rates keep the latest value.
  std::map<std::string, unsigned long long> rejected_by_reason;
  std::map<std::string, unsigned long long> transport_counters;

  // Adds what a retiring engine did.
  void add(const Engine& engine);
};

}  // namespace optireduce::entry
