// Which UCX protocol an engine message takes: eager (the sender pushes it) or rendezvous (the
// receiver fetches it into its destination). Chosen once per transport, from the lanes UCX picked.
#pragma once

#include <cstddef>
#include <string>

namespace optireduce::ucx {

// Over shared memory a larger eager message crosses UCX's FIFO in fragments that UCX copies into
// a buffer it allocates per message (and whose pages fault in each time); a rendezvous over cma,
// xpmem or knem copies it once, from the sender's buffer to its destination.
inline constexpr std::size_t kSharedMemoryRendezvousBytes = 64u << 10;

class SendProtocol {
 public:
  SendProtocol() = default;  // every message eager
  // `lanes`: lanes_in_use() of the connected endpoints. `user_threshold`: the user set UCX's
  // rendezvous threshold for the engine (ucx_context.hpp). Over a network every message goes
  // eager: a rendezvous fetch over UCX's tcp could wait for its sender until it timed out. Over
  // shared memory a user's threshold decides, else messages from kSharedMemoryRendezvousBytes
  // go by rendezvous where a single-copy transport reads them.
  static SendProtocol choose(const std::string& lanes, bool user_threshold);
  // The UCP_AM_SEND_FLAG_* (EAGER, RNDV, or none: UCX's choice) of a message of this payload.
  unsigned flag(std::size_t payload_bytes) const;

 private:
  enum class Kind { eager, ucx_choice, rendezvous_when_large };
  explicit SendProtocol(Kind kind) : kind_(kind) {}
  Kind kind_ = Kind::eager;
};

}  // namespace optireduce::ucx
