// One UCP context per process, shared by the transports of every communicator (each has its own
// worker): contexts are heavy (memory domains, registration caches, a thread for some
// transports), and a job may create many communicators.
#pragma once

#include <ucp/api/ucp.h>

#include <cstddef>
#include <memory>
#include <vector>
#include <string>

#include "optireduce/status.hpp"

namespace optireduce::ucx {

// The engine's UCX settings: UCX_* first, then OPTIREDUCE_UCX_* (so a job's own UCX settings are
// untouched by ours).
inline constexpr const char* kEnvPrefix = "OPTIREDUCE";

class SharedContext {
 public:
  ~SharedContext();
  ucp_context_h handle() const { return context_; }
  // Engine messages go eagerly (UCP_AM_SEND_FLAG_EAGER) unless the user set UCX's rendezvous
  // threshold for the engine (UCX_RNDV_THRESH or OPTIREDUCE_UCX_RNDV_THRESH): then UCX chooses
  // per message from that threshold.
  bool eager_only() const { return eager_only_; }

 private:
  friend std::shared_ptr<SharedContext> acquire_context(std::size_t chunk_bytes, Status& status);
  ucp_context_h context_ = nullptr;
  bool eager_only_ = true;
};

// The process's context, created on first use. `chunk_bytes` (the largest engine payload) sizes
// UCX's TCP segments when the context is created.
std::shared_ptr<SharedContext> acquire_context(std::size_t chunk_bytes, Status& status);

// UCX transports this host offers, one "transport/device" per entry (for optireduce-info).
std::vector<std::string> available_transports();

}  // namespace optireduce::ucx
