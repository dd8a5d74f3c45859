// One transport an engine sends over, with the staging its sends read: the staging of a call
// is free once that transport has completed the call's sends, so each transport has its own.
#pragma once

#include <memory>
#include <string>

#include "optireduce/engine/engine/staging_pool.hpp"
#include "optireduce/transport.hpp"

namespace optireduce {

struct TransportPath {
  TransportPath(std::unique_ptr<Transport> t, std::string module_name, int rank, int ranks)
      : staging(rank, ranks), transport(std::move(t)), name(std::move(module_name)) {}
  StagingPool staging;
  // After the staging: destroyed first, so sends it still drives never read freed staging.
  std::unique_ptr<Transport> transport;
  std::string name;  // the module: "ucx", "udp", "ofi"
};

}  // namespace optireduce
