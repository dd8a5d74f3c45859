// The three-stage call's one outcome (hierarchy/host_tiers.hpp, docs/design.md "Many ranks per
// host"): a failure inside one host alone, or in one slice's exchange across hosts, fails that
// call on every rank of every host, and the communicator's next call too; the calls before it
// succeed everywhere with the exact sum. Float32 calls, and 16-bit ones (2-byte elements through
// the host's segment and the slices' exchanges, the failure flag over the job's MPI included).
//
// The failures are made, not timed: a host's segment that cannot be made (its name is taken
// before the call that needs it, so its first rank's exclusive create fails and the others wait
// for it in vain), and every datagram of one slice's exchange lost from one call on.
#include <gtest/gtest.h>

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <barrier>
#include <string>

#include "tiers_job.hpp"

namespace optireduce {
namespace {

using testing::InProcNetwork;
using testing::TiersJob;
using testing::TiersOutcome;

EngineOptions failing_options() {
  EngineOptions options;
  options.watchdog = std::chrono::milliseconds(3000);  // how long the blocked host's ranks wait
  options.timeout = std::chrono::milliseconds(2000);
  options.calibration_calls = 2;
  options.loss_budget = 1.0;
  return options;
}

// Calls before `failing` succeed on every rank (exact where nothing was dropped, replicas
// identical); `failing` and every later call fail on every rank.
void expect_one_outcome(const TiersOutcome& out, const TiersJob& job, int failing) {
  ASSERT_TRUE(out.all_tiered);
  const int ranks = placement_from_counts(job.counts).ranks();
  for (int c = 0; c < job.calls; ++c) {
    const std::uint64_t count = job.count_of ? job.count_of(c) : job.count;
    const auto sum = testing::tiers_exact_sum(ranks, c, count);
    for (int r = 0; r < ranks; ++r) {
      const std::size_t at = static_cast<std::size_t>(c * ranks + r);
      if (c >= failing) {
        EXPECT_FALSE(out.stats[at].ok()) << "rank " << r << " succeeded call " << c << ", which must fail on every rank";
        continue;
      }
      ASSERT_TRUE(out.stats[at].ok()) << "rank " << r << " call " << c << ": " << out.stats[at].status.text();
      ASSERT_EQ(out.results[at], out.results[static_cast<std::size_t>(c * ranks)]) << "replica of rank " << r << ", call " << c;
      if (out.stats[at].dropped_entries == 0) {
        ASSERT_EQ(out.results[at], sum) << "rank " << r << " call " << c;
      }
    }
  }
}

// Host 1's segment for call 2 (larger than the first: a new one) cannot be made.
void expect_blocked_segment_fails_everywhere(const std::vector<int>& counts, bool bounded, bool datagrams, bool over_mpi,
                                             ElementFormat format = ElementFormat::float32) {
  const Placement placement = placement_from_counts(counts);
  InProcNetwork clean;
  TiersJob job;
  job.counts = counts, job.calls = 4, job.options = failing_options(), job.format = format;
  job.network = datagrams ? &clean : nullptr, job.bounded = bounded, job.exact_over_mpi = over_mpi;
  const std::uint64_t large = 1200000 / element_bytes(format);  // past the first 1 MiB slot
  job.count_of = [large](int call) -> std::uint64_t { return call < 2 ? 20000 : large; };
  const int blocker_rank = placement.ranks_of_host[1][0];
  std::string taken;
  job.before_call = [&](int rank, int call, const Engine& engine) {
    if (rank != blocker_rank || call != 2) return;
    taken = HostTiers::segment_name(engine.comm_id(), placement.host_names[1], 2);
    const int fd = shm_open(taken.c_str(), O_RDWR | O_CREAT | O_EXCL, 0600);
    ASSERT_GE(fd, 0) << taken;
    close(fd);
  };
  const TiersOutcome out = testing::run_tiers_job(job);
  if (!taken.empty()) shm_unlink(taken.c_str());
  ASSERT_FALSE(taken.empty());
  expect_one_outcome(out, job, 2);
}

TEST(HostTiersFailure, HostSegmentNotMadeFailsEveryHostExactTransport) {
  expect_blocked_segment_fails_everywhere({2, 2}, false, false, false);
}
TEST(HostTiersFailure, HostSegmentNotMadeFailsEveryHostCalibratingOverDatagrams) {
  expect_blocked_segment_fails_everywhere({3, 2}, true, true, false);
}
TEST(HostTiersFailure, HostSegmentNotMadeFailsEveryHostExactOverTheJobsMpi) {
  expect_blocked_segment_fails_everywhere({2, 3}, false, true, true);
}
TEST(HostTiersFailure, HostSegmentNotMadeFailsEveryHostBfloat16ExactOverTheJobsMpi) {
  expect_blocked_segment_fails_everywhere({3, 2}, false, true, true, ElementFormat::bfloat16);
}

// Slice 0's exchange loses every datagram, data and control, from call 3 on (a bounded call):
// its holders, one per host, fail it, and through every host's all-gather so does every rank.
thread_local int t_call = -1;  // the call the sending rank's thread is in

void expect_cut_slice_fails_everywhere(ElementFormat format) {
  const std::vector<int> counts{3, 2};
  const int ranks = placement_from_counts(counts).ranks();
  InProcNetwork clean, cut;
  cut.drop = [](int, int, std::span<const std::byte>) { return t_call >= 3; };
  cut.drop_control = true;
  std::barrier<> sync(ranks);  // call 2 over on every rank before anything is lost
  TiersJob job;
  job.counts = counts, job.calls = 5, job.count = 20000, job.options = failing_options(), job.bounded = true;
  job.format = format;
  job.options.timeout = std::chrono::milliseconds(5000);  // the cut call's hard deadline; the others end far sooner
  job.options.watchdog = std::chrono::milliseconds(5000);
  job.network_of = [&](int slice) { return slice == 0 ? &cut : &clean; };
  job.before_call = [&](int, int call, const Engine&) {
    if (call == 3) sync.arrive_and_wait();
    t_call = call;
  };
  job.left_early = [&](int) { sync.arrive_and_drop(); };
  const TiersOutcome out = testing::run_tiers_job(job);
  expect_one_outcome(out, job, 3);
  for (int r = 0; r < ranks; ++r)
    EXPECT_EQ(out.stats[static_cast<std::size_t>(2 * ranks + r)].kind, CallKind::bounded) << "rank " << r << ": call 2 was not bounded";
}

TEST(HostTiersFailure, CutSliceExchangeFailsEveryHost) { expect_cut_slice_fails_everywhere(ElementFormat::float32); }
TEST(HostTiersFailure, CutSliceExchangeFailsEveryHostFloat16) { expect_cut_slice_fails_everywhere(ElementFormat::float16); }

}  // namespace
}  // namespace optireduce
