#include "optireduce/engine/deadlines/step_aside.hpp"

#include <algorithm>
#include <cstring>

#include "optireduce/engine/log.hpp"

namespace optireduce {
namespace {

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

}  // namespace

StepAside::Path StepAside::next(unsigned size_class) const {
  if (!eligible_) return Path::engine;
  const auto it = classes_.find(size_class);
  if (it == classes_.end()) return Path::engine;  // the first call warms the engine's buffers
  const ClassState& s = it->second;
  if (s.decided) return s.over_mpi ? Path::mpi : Path::engine;
  return s.calls % 2 ? Path::mpi_sample : Path::engine_sample;
}

void StepAside::record(unsigned size_class, Path path, double latency_us, Bootstrap& bootstrap) {
  if (!eligible_) return;
  ClassState& s = classes_[size_class];
  if (s.decided) return;
  if (path == Path::engine_sample) s.engine_us.push_back(latency_us);
  if (path == Path::mpi_sample) s.mpi_us.push_back(latency_us);
  ++s.calls;
  if (s.engine_us.size() >= kSamples && s.mpi_us.size() >= kSamples) decide(size_class, s, bootstrap);
}

void StepAside::decide(unsigned size_class, ClassState& s, Bootstrap& bootstrap) {
  // A call ends when its slowest rank does: compare each path on the rank where it was slowest.
  const double mine[2] = {median(s.engine_us), median(s.mpi_us)};
  double slowest[2] = {0, 0};
  for (const auto& blob : bootstrap.allgather({reinterpret_cast<const std::byte*>(mine), sizeof mine})) {
    if (blob.size() != sizeof mine) continue;
    double theirs[2];
    std::memcpy(theirs, blob.data(), sizeof theirs);
    slowest[0] = std::max(slowest[0], theirs[0]);
    slowest[1] = std::max(slowest[1], theirs[1]);
  }
  s.decided = true;
  s.over_mpi = !(slowest[0] < kEngineMargin * slowest[1]);
  s.engine_us.clear();
  s.mpi_us.clear();
  if (rank_ == 0)
    OR_LOG(info, "calls of %llu to %llu bytes over shared memory: the MPI's allreduce %.0f us, the engine %.0f us: %s",
           1ull << size_class, 2ull << size_class, slowest[1], slowest[0],
           s.over_mpi ? "they step aside to the MPI's" : "the engine keeps them");
}

unsigned StepAside::classes_over_mpi() const {
  unsigned n = 0;
  for (const auto& [cls, s] : classes_) n += s.decided && s.over_mpi;
  return n;
}

}  // namespace optireduce
