// Per-communicator mode: not every float sum is a gradient (metrics, batch-norm statistics and
// gradient norms want exact sums). MPI_Comm_set_info and the C API are collective, but MPI lets
// the values differ per rank, so the ranks agree inside the call: the most exact of the values
// given (off > reliable > bounded), or an error on every rank when any rank's value is invalid.
// Every rank of the communicator then takes the same path.
#include <mpi.h>

#include <cstring>
#include <iterator>
#include <optional>
#include <string>

#include "comm_engines.hpp"
#include "optireduce/log.hpp"
#include "runtime.hpp"

namespace optireduce::pmpi {
namespace {

constexpr const char* kInfoKey = "optireduce_mode";

// Ordered by exactness, so the agreement is a maximum; a vote is its word's index in kModes.
enum ModeVote : int { kNoValue = -1, kBounded = 0, kReliable = 1, kOff = 2, kInvalid = 3 };
constexpr const char* kModes[] = {"bounded", "reliable", "off"};
static_assert(std::size(kModes) == kInvalid);

ModeVote vote_of(const char* text) {
  if (!text) return kNoValue;
  for (int vote = kBounded; vote < kInvalid; ++vote)
    if (!std::strcmp(text, kModes[vote])) return static_cast<ModeVote>(vote);
  return kInvalid;
}

std::string accepted_modes() {
  std::string words;
  for (const char* mode : kModes) words += (words.empty() ? "" : ", ") + std::string(mode);
  return words;
}

// Collective over `comm`. Returns MPI_SUCCESS or an MPI error class, the same on every rank.
int agree_and_set_mode(MPI_Comm comm, const char* text) {
  if (!initialized()) {
    OR_LOG(error, "optireduce_mode set before MPI_Init or after MPI_Finalize");
    return MPI_ERR_OTHER;
  }
  if (comm == MPI_COMM_NULL) return MPI_ERR_COMM;
  const int mine = vote_of(text);
  if (mine == kInvalid)
    OR_LOG(error, "optireduce_mode=\"%s\" is not valid; accepted: %s", text, accepted_modes().c_str());
  int inter = 0, agreed = mine;
  if (PMPI_Comm_test_inter(comm, &inter) != MPI_SUCCESS) return MPI_ERR_COMM;
  // An intercommunicator's calls never reach the engine: nothing to agree on.
  if (!inter && PMPI_Allreduce(&mine, &agreed, 1, MPI_INT, MPI_MAX, comm) != MPI_SUCCESS) return MPI_ERR_OTHER;
  if (agreed == kInvalid) return MPI_ERR_ARG;
  if (agreed == kNoValue) return MPI_SUCCESS;
  CommState& state = comm_state(comm);
  if (state.engine) optireduce_engine_set_mode(state.engine, kModes[agreed]);
  return MPI_SUCCESS;
}

}  // namespace
}  // namespace optireduce::pmpi

using namespace optireduce::pmpi;

extern "C" {

int MPI_Comm_set_info(MPI_Comm comm, MPI_Info info) {
  const int rc = PMPI_Comm_set_info(comm, info);
  if (rc != MPI_SUCCESS || !initialized()) return rc;
  // Every rank takes part in the agreement, also those whose info lacks the key.
  char value[64] = {};
  int found = 0;
  if (info != MPI_INFO_NULL) PMPI_Info_get(info, kInfoKey, sizeof value - 1, value, &found);
  const int mode_rc = agree_and_set_mode(comm, found ? value : nullptr);
  if (mode_rc == MPI_SUCCESS) return rc;
  PMPI_Comm_call_errhandler(comm, mode_rc);
  return mode_rc;
}

int optireduce_comm_set_mode(MPI_Comm comm, const char* mode) { return agree_and_set_mode(comm, mode ? mode : ""); }

int optireduce_comm_set_mode_f(int fortran_comm, const char* mode) {
  return agree_and_set_mode(PMPI_Comm_f2c(static_cast<MPI_Fint>(fortran_comm)), mode ? mode : "");
}

}  // extern "C"
