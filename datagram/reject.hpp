// Why a datagram was dropped before the engine saw it, and which of the transport's counters
// each reason goes to.
#pragma once

#include <cstdint>

#include "optireduce/transport.hpp"

namespace optireduce::datagram {

enum class Reject : std::uint8_t {
  short_datagram,    // shorter than the datagram header
  bad_magic,
  bad_version,
  bad_kind,
  bad_length,        // lengths that do not add up to the datagram, or that the kind forbids
  bad_source,        // a rank outside the job, or this rank itself
  unknown_endpoint,  // from an address that is no rank's
  bad_tag,           // the keyed tag is wrong
  foreign_source,    // authentic, but it arrived from another rank's endpoint than its source's
};

const char* to_string(Reject reason);

// malformed: the first six; unauthenticated: unknown_endpoint, bad_tag; foreign: foreign_source.
void count(Reject reason, TransportCounters& counters);

}  // namespace optireduce::datagram
