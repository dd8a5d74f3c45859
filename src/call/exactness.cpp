// The end of a calibration call made exact by resends: whether its result is exact on every rank,
// decided by every rank alike from the lists of missing chunks, over the datagram path itself.
// The job's MPI would do it in one small allreduce, but where the network loses packets that
// allreduce rides the same lossy path over TCP, and a lost segment waits out a retransmission
// timeout, for every rank.
//
// The answer is "not exact" as soon as any list names a chunk or any chunk came reduced without
// every contribution (each rank that lacks nothing saw every such flag); "exact" only once every
// rank's list came and all are empty. Either way it is the same on every rank that knows it; the
// exchange that tells every rank (or fails the call on every rank) is call/list_exchange.cpp.
#include "optireduce/engine/call/tar_call.hpp"

namespace optireduce {

bool TarCall::exactness_known() const {
  return !s_.fill.union_empty() || s_.ledger.dropped() > 0 || s_.fill.complete(s_.ranks);
}

bool TarCall::exact_everywhere() const {
  return s_.fill.complete(s_.ranks) && s_.fill.union_empty() && s_.ledger.dropped() == 0;
}

}  // namespace optireduce
