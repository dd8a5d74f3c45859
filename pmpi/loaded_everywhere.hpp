// Whether every rank of the job loaded the library, asked before optireduce_init's first collective.
#pragma once

namespace optireduce::pmpi {

// Collective over MPI_COMM_WORLD among the ranks that loaded the library, and bounded: a rank
// without it never answers (point-to-point messages, which no collective of that rank matches).
// false: some rank lacks it; one line naming it went to stderr (on rank 0, or where rank 0 lacks
// it on each rank that waited for rank 0), and the job must end (MPI_Abort: the ranks without
// the library wait in their collectives).
bool loaded_everywhere();

}  // namespace optireduce::pmpi
