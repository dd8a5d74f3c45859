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
int case_smoke();       // a few calls, for tests about configuration, reports and launch

}  // namespace mpitest
