// The sub-cases of allreduce_check, one per command-line name. Each fails through
// mpitest::fail (aborting the job) and returns how many calls it checked.
#pragma once

namespace mpitest {

int case_exact();       // integer data, many counts, every kind of communicator, in place and not
int case_large();       // one 2^24+3 element call on world, in place and not
int case_threshold();   // counts around OPTIREDUCE_MIN_BYTES: below passes through, at/above runs
int case_random();      // non-integer data: identical on all ranks, close to PMPI
int case_ineligible();  // other types, ops, derived types, intercommunicators: exactly PMPI's
int case_threads();     // two threads reducing on two communicators at once
int case_buckets();     // a training step of seven in-place buckets of distinct sizes, reversed
int case_mode_disagreement();  // set_mode and info values that differ per rank: one agreed mode
int case_first_use_race();     // a new communicator met by two threads at once
int case_late_rank();          // one rank late by MPITEST_LATE_MS: exact, bounded, or one agreed failure
int case_outage();             // one direction cut at the end of a calibration call: one agreed failure, then the MPI
int case_half();        // fp16/bf16 sums of 2-byte types with user ops: served; other ops passed, by reason
int case_smoke();       // a few calls, for tests about configuration, reports and launch
int case_hierarchy();   // one size of calls over several hosts (cluster.sh): replicas identical, sums right
int case_hierarchy_half();  // the same in fp16 and bf16 (2-byte datatype, user op): three stages in 16 bits
int case_reduce_scatter();  // MPI_Reduce_scatter(_block): every shape, exact, counted; what passes through
int case_hierarchy_reduce_scatter();  // reduce-scatters over several hosts (cluster.sh): each block's sum right

// Bounded mode (case_bounded.cpp); run with OPTIREDUCE_MODE=bounded and the faults they name.
int case_bounded_loss();    // OPTIREDUCE_FAULT_DROP: dropped fraction near the rate, error explained
int case_bounded_delay();   // OPTIREDUCE_FAULT_DELAY=R:MS:1: the others return before rank R arrives
int case_bounded_modes();   // reliable after lossy calls is exact, off passes through, bad value refused
int case_bounded_trace();   // OPTIREDUCE_TRACE: one line per engine call per rank
int case_bounded_clean();   // no faults, calls that may cut only a scatter-reduce: all exact
int case_bounded_memory();  // 10 000 small bounded calls: resident set flat
int case_reduce_scatter_bounded();  // reduce-scatters past calibration: bounded, every wrong entry counted

}  // namespace mpitest
