#include "reject.hpp"

namespace optireduce::datagram {

const char* to_string(Reject reason) {
  switch (reason) {
    case Reject::short_datagram: return "short_datagram";
    case Reject::bad_magic: return "bad_magic";
    case Reject::bad_version: return "bad_version";
    case Reject::bad_kind: return "bad_kind";
    case Reject::bad_length: return "bad_length";
    case Reject::bad_source: return "bad_source";
    case Reject::unknown_endpoint: return "unknown_endpoint";
    case Reject::bad_tag: return "bad_tag";
    case Reject::foreign_source: return "foreign_source";
  }
  return "?";
}

void count(Reject reason, TransportCounters& counters) {
  switch (reason) {
    case Reject::unknown_endpoint:
    case Reject::bad_tag:
      ++counters.rejected_unauthenticated;
      return;
    case Reject::foreign_source:
      ++counters.rejected_foreign_source;
      return;
    default:
      ++counters.rejected_malformed;
      return;
  }
}

}  // namespace optireduce::datagram
