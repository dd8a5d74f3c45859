// Settings that are collective but may differ per rank, and a communicator's first use from two
// threads at once: every rank must take the same path, no state may be created twice.
#include <atomic>
#include <thread>
#include <vector>

#include "cases.hpp"
#include "harness.hpp"
#include "sum_checks.hpp"

namespace mpitest {
namespace {

// One eligible call on `comm`, checked bit for bit; whether the engine ran it, by its counter.
bool engine_ran(MPI_Comm comm, int salt) {
  const std::uint64_t before = last_call(comm).sequence;
  const std::int64_t count = 300000;
  const auto input = integer_pattern(count, comm_rank(comm), salt);
  std::vector<float> want(input.size()), got(input.size());
  PMPI_Allreduce(input.data(), want.data(), static_cast<int>(count), MPI_FLOAT, MPI_SUM, comm);
  MPITEST_CHECK(MPI_Allreduce(input.data(), got.data(), static_cast<int>(count), MPI_FLOAT, MPI_SUM, comm) == MPI_SUCCESS,
                "MPI_Allreduce failed (salt %d)", salt);
  expect_bitwise_equal(got, want, "salt " + std::to_string(salt));
  const int ran = last_call(comm).sequence != before ? 1 : 0;
  int ran_everywhere = ran, ran_somewhere = ran;
  PMPI_Allreduce(&ran, &ran_everywhere, 1, MPI_INT, MPI_MIN, comm);
  PMPI_Allreduce(&ran, &ran_somewhere, 1, MPI_INT, MPI_MAX, comm);
  MPITEST_CHECK(ran_everywhere == ran_somewhere, "salt %d: the ranks took different paths", salt);
  return ran != 0;
}

}  // namespace

int case_mode_disagreement() {
  const SetMode set_mode = lookup<SetMode>("optireduce_comm_set_mode");
  MPI_Comm comm = MPI_COMM_NULL;
  MPI_Comm_dup(MPI_COMM_WORLD, &comm);
  const int me = comm_rank(comm);
  int salt = 0;
  MPITEST_CHECK(engine_ran(comm, ++salt), "the engine did not run by default");
  // Rank 0 alone says off, the others bounded: the most exact value wins on every rank.
  MPITEST_CHECK(set_mode(comm, me == 0 ? "off" : "bounded") == MPI_SUCCESS, "set_mode failed");
  MPITEST_CHECK(!engine_ran(comm, ++salt), "off on rank 0 did not turn the engine off everywhere");
  // Only the last rank's info carries the key (reliable): every rank runs the engine again.
  MPI_Info info = MPI_INFO_NULL;
  MPI_Info_create(&info);
  if (me == comm_size(comm) - 1) MPI_Info_set(info, "optireduce_mode", "reliable");
  MPITEST_CHECK(MPI_Comm_set_info(comm, info) == MPI_SUCCESS, "MPI_Comm_set_info failed");
  MPI_Info_free(&info);
  MPITEST_CHECK(engine_ran(comm, ++salt), "reliable on one rank did not turn the engine back on");
  MPITEST_CHECK(last_call(comm).kind == OPTIREDUCE_CALL_EXACT, "the agreed mode is not reliable");
  // One rank's invalid value: every rank gets the error and nothing changes.
  MPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN);
  const int rc = set_mode(comm, me == 0 ? "fast" : "off");
  MPITEST_CHECK(rc == MPI_ERR_ARG, "an invalid value on rank 0 returned %d on rank %d", rc, me);
  MPITEST_CHECK(engine_ran(comm, ++salt), "a refused value changed the mode");
  MPI_Comm_free(&comm);
  return salt;
}

int case_first_use_race() {
  // A monitoring thread asks for the last call of a new communicator while its first
  // MPI_Allreduce (which creates the engine) runs on another thread.
  int checked = 0;
  for (int round = 0; round < 20; ++round) {
    MPI_Comm comm = MPI_COMM_NULL;
    MPI_Comm_dup(MPI_COMM_WORLD, &comm);
    std::atomic<bool> done{false};
    std::thread monitor([&] {
      while (!done.load()) (void)last_call(comm);
    });
    check_integer_sum({comm, "new communicator", 300000, round % 2 == 0, MPI_FLOAT, round, /*count_stats=*/false});
    done = true;
    monitor.join();
    MPITEST_CHECK(last_call(comm).sequence == 1, "round %d: the first call is not number 1", round);
    MPI_Comm_free(&comm);
    ++checked;
  }
  return checked;
}

}  // namespace mpitest
