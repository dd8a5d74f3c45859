#include "engine_history.hpp"

#include <algorithm>

namespace optireduce::entry {

void EngineHistory::add(const Engine& e) {
  peak_buffer_bytes = std::max(peak_buffer_bytes, e.buffer_bytes());
  largest_call_bytes = std::max(largest_call_bytes, e.largest_call_bytes());
  divergent_calls += e.agreed().divergent_calls;
  fallbacks += e.agreed().fallbacks;
  injected_drops += e.agreed().injected_drops;
  fill_agreement_incomplete += e.agreed().fill_agreement_incomplete;
  calibration_reruns += e.agreed().calibration_reruns;
  resend_requests += e.agreed().resend_requests;
  resend_chunks_asked += e.agreed().resend_chunks_asked;
  resent_chunks += e.agreed().resent_chunks;
  contributions_added_on_arrival += e.contributions_added_on_arrival();
  contributions_waited_in_slot += e.contributions_waited_in_slot();
  transports.insert(e.transport_description());
  late.messages += e.late_arrivals().messages;
  late.bytes += e.late_arrivals().bytes;
  late.wait_us += e.late_arrivals().wait_us;
  late.call_wait_us += e.late_arrivals().call_wait_us;
  const RejectCounts& r = e.rejects();
  const TransportCounters t = e.transport_counters();
  const std::pair<const char*, std::uint64_t> reasons[] = {
      {"malformed", r.malformed + t.rejected_malformed}, {"foreign", r.foreign},
      {"stale", r.stale},                                 {"misplaced", r.misplaced},
      {"duplicate", r.duplicate},                         {"overflow", r.overflow},
      {"unauthenticated", t.rejected_unauthenticated},    {"unknown_sender", t.rejected_foreign_source}};
  for (const auto& [name, n] : reasons)
    if (n) rejected_by_reason[name] += n;
  rejected_messages += r.total() + t.rejected();
  const std::pair<const char*, std::uint64_t> sums[] = {
      {"messages_sent", t.messages_sent}, {"messages_received", t.messages_received}, {"bytes_sent", t.bytes_sent},
      {"bytes_received", t.bytes_received}, {"send_calls", t.send_calls}, {"receive_calls", t.receive_calls},
      {"receive_buffers", t.receive_buffers},
      {"send_errors", t.send_errors}, {"abandoned_sends", t.abandoned_sends}, {"fec_parity_sent", t.fec_parity_sent},
      {"fec_repaired", t.fec_repaired}};
  for (const auto& [name, n] : sums)
    if (n) transport_counters[name] += n;
  if (t.pace_bytes_per_s > 0) transport_counters["pace_bytes_per_s"] = static_cast<unsigned long long>(t.pace_bytes_per_s);
}

}  // namespace optireduce::entry
