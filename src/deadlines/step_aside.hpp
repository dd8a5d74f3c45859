// Within one host, over shared memory, the MPI's own allreduce may beat the engine. The network
// is not what is being bounded there, so each size class takes the faster exact path: a few of
// its first calls run over the job's MPI, as many over the engine, and then the ranks agree
// (each path's time on its slowest rank) which one the class's later calls take. The inputs
// (call sequence, sizes, the agreed figures) are the same on every rank, so is the decision.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "optireduce/engine/engine/bootstrap.hpp"

namespace optireduce {

class StepAside {
 public:
  // Path samples per size class and path, after one call that warms the engine's buffers.
  static constexpr unsigned kSamples = 6;
  // The engine keeps a size class only when it is clearly faster: the MPI's own allreduce is what
  // the user would have had, and two paths of about the same speed swap places with the noise of
  // a shared host from one job to the next.
  static constexpr double kEngineMargin = 0.9;

  // `eligible`: agreed at creation (one host, the engine's transport on shared memory, no fault
  // injection, not turned off). Then calls are exact, bounded mode or not (nothing to bound);
  // otherwise every call is the engine's.
  StepAside(bool eligible, int rank) : eligible_(eligible), rank_(rank) {}
  bool eligible() const { return eligible_; }

  // The path of the next call of this size class.
  enum class Path { engine, engine_sample, mpi_sample, mpi };
  Path next(unsigned size_class) const;
  // The time a sample call took; the last sample of a class agrees the class's path
  // (collective: every rank records its last sample at the same call).
  void record(unsigned size_class, Path path, double latency_us, Bootstrap& bootstrap);

  // For the report and the log: size classes decided so far and what they chose.
  unsigned classes_over_mpi() const;

 private:
  struct ClassState {
    unsigned calls = 0;
    std::vector<double> engine_us, mpi_us;
    bool decided = false, over_mpi = false;
  };
  void decide(unsigned size_class, ClassState& s, Bootstrap& bootstrap);

  bool eligible_;
  int rank_;
  std::map<unsigned, ClassState> classes_;
};

}  // namespace optireduce
