// Per-communicator mode: not every float sum is a gradient (metrics, batch-norm statistics and
// gradient norms want exact sums). Set collectively, like MPI_Comm_set_info itself, so every rank
// of the communicator takes the same path.
#include <mpi.h>

#include <cstring>
#include <optional>
#include <string>

#include "comm_engines.hpp"
#include "optireduce/engine/log.hpp"
#include "runtime.hpp"

namespace optireduce::pmpi {
namespace {

constexpr const char* kInfoKey = "optireduce_mode";

std::optional<Mode> parse_mode(const char* text) {
  if (!text) return std::nullopt;
  if (!std::strcmp(text, "bounded")) return Mode::bounded;
  if (!std::strcmp(text, "reliable")) return Mode::reliable;
  if (!std::strcmp(text, "off")) return Mode::off;
  return std::nullopt;
}

// Returns MPI_SUCCESS or an MPI error class, after logging why.
int set_mode(MPI_Comm comm, const char* text) {
  if (!initialized()) {
    OR_LOG(error, "optireduce_mode set before MPI_Init or after MPI_Finalize");
    return MPI_ERR_OTHER;
  }
  const auto mode = parse_mode(text);
  if (!mode) {
    OR_LOG(error, "optireduce_mode=\"%s\" is not valid; accepted: bounded, reliable, off", text ? text : "(null)");
    return MPI_ERR_ARG;
  }
  if (comm == MPI_COMM_NULL) return MPI_ERR_COMM;
  CommState& state = comm_state(comm);
  std::lock_guard lock(state.mutex);
  state.mode = *mode;
  return MPI_SUCCESS;
}

}  // namespace
}  // namespace optireduce::pmpi

using namespace optireduce::pmpi;

extern "C" {

int MPI_Comm_set_info(MPI_Comm comm, MPI_Info info) {
  const int rc = PMPI_Comm_set_info(comm, info);
  if (rc != MPI_SUCCESS || info == MPI_INFO_NULL || !initialized()) return rc;
  char value[64] = {};
  int found = 0;
  PMPI_Info_get(info, kInfoKey, sizeof value - 1, value, &found);
  if (!found) return rc;
  const int mode_rc = set_mode(comm, value);
  if (mode_rc == MPI_SUCCESS) return rc;
  PMPI_Comm_call_errhandler(comm, mode_rc);
  return mode_rc;
}

int optireduce_comm_set_mode(MPI_Comm comm, const char* mode) { return set_mode(comm, mode); }

int optireduce_comm_set_mode_f(int fortran_comm, const char* mode) {
  return set_mode(PMPI_Comm_f2c(static_cast<MPI_Fint>(fortran_comm)), mode);
}

}  // extern "C"
