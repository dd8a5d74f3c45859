#include "runner.hpp"

#include <algorithm>
#include <chrono>
#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <map>
#include <thread>

namespace optireduce::bench {

namespace {
// JSON has no infinity: a result with a NaN or an infinite entry gets this huge error instead.
double finite(double x) { return std::isfinite(x) ? x : 1e300; }
float* result_of(std::vector<std::vector<float>>& send, std::vector<std::vector<float>>& recv, std::size_t b) {
  return recv[b].empty() ? send[b].data() : recv[b].data();
}
}  // namespace

Runner::Runner(const Options& opt, MPI_Comm comm) : opt_(opt), comm_(comm) {
  MPI_Comm_rank(comm_, &rank_);
  MPI_Comm_size(comm_, &nranks_);
  if (opt_.host_barrier) host_barrier_ = std::make_unique<optireduce::tools::HostBarrier>(comm_);
}

void Runner::barrier() {
  if (!host_barrier_) {
    PMPI_Barrier(comm_);
    return;
  }
  try {
    host_barrier_->arrive();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "optireduce-bench: error: rank %d: %s\n", rank_, e.what());
    MPI_Abort(comm_, 1);
  }
}

int Runner::call(Buffers& send, Buffers& recv, std::size_t b) {
  const int count = static_cast<int>(send[b].size());
  return opt_.in_place ? MPI_Allreduce(MPI_IN_PLACE, send[b].data(), count, MPI_FLOAT, MPI_SUM, comm_)
                       : MPI_Allreduce(send[b].data(), recv[b].data(), count, MPI_FLOAT, MPI_SUM, comm_);
}

// --warmup-calls untimed calls per size class (power-of-two byte range: the unit in which the
// engine calibrates its deadlines), cycling through the entry's bucket sizes of the class; each
// result checked like the others. Returns false when one was wrong.
bool Runner::run_preparatory(const Entry& entry, Buffers& send, Buffers& recv) {
  std::map<int, std::vector<std::size_t>> classes;
  for (std::size_t b = 0; b < entry.buckets.size(); ++b)
    classes[static_cast<int>(std::floor(std::log2(static_cast<double>(entry.buckets[b]))))].push_back(b);
  bool ok = true;
  for (const auto& [cls, members] : classes) {
    for (int i = 0; i < entry.warmup_calls; ++i) {
      const std::size_t b = members[static_cast<std::size_t>(i) % members.size()];
      const std::uint64_t input = next_input_++;
      fill_input(send[b].data(), send[b].size(), rank_, input);
      const int rc = call(send, recv, b);
      const CallInfo info = probe_.after_call(comm_);
      ++calls_;
      if (!opt_.check && rc == MPI_SUCCESS) continue;
      const float* out = result_of(send, recv, b);
      const Deviation d = deviation(out, send[b].size(), nranks_, input);
      if (classify(rc, info, d) & kWrong) {
        report_wrong(entry.name + " (warm-up call)", calls_, input, info, d, out, rc);
        ok = false;
      }
    }
  }
  return ok;
}

EntryResult Runner::run(const Entry& entry) {
  const auto& buckets = entry.buckets;
  const std::size_t nb = buckets.size();
  Buffers send(nb), recv(nb);
  for (std::size_t b = 0; b < nb; ++b) {
    send[b].assign(buckets[b] / 4, 0.0f);
    if (!opt_.in_place) recv[b].assign(buckets[b] / 4, 0.0f);
  }
  EntryResult r;
  r.entry = entry;
  r.calls_per_iteration = static_cast<int>(nb);
  const std::uint64_t calls_before = calls_;
  const bool preparatory_ok = run_preparatory(entry, send, recv);
  r.preparatory_calls = calls_ - calls_before;
  const int iterations = opt_.warmup + opt_.iters;
  std::vector<std::uint64_t> input_of(nb);
  for (int it = 0; it < iterations; ++it) {
    // Inputs are written before the barrier: filling is the user's compute, not the reduction.
    for (std::size_t b = 0; b < nb; ++b) {
      input_of[b] = next_input_++;
      fill_input(send[b].data(), send[b].size(), rank_, input_of[b]);
    }
    std::vector<int> rcs(nb);
    std::vector<CallInfo> infos(nb);
    std::vector<std::uint64_t> ordinal(nb);
    barrier();
    const double t0 = MPI_Wtime();
    if (entry.compute_s > 0) std::this_thread::sleep_for(std::chrono::duration<double>(entry.compute_s));
    const double c0 = MPI_Wtime();
    double prev = c0;
    for (std::size_t k = 0; k < nb; ++k) {
      const std::size_t b = nb - 1 - k;
      rcs[b] = call(send, recv, b);
      const double t = MPI_Wtime();
      r.call_ms.push_back((t - prev) * 1e3);
      prev = t;
      infos[b] = probe_.after_call(comm_);
      ordinal[b] = ++calls_;
      // Test hook: one wrong value in one call's result, as a broken contender would return.
      if (ordinal[b] == opt_.corrupt_call && rank_ == 0) result_of(send, recv, b)[0] += 1.0f;
    }
    r.iteration_ms.push_back((prev - t0) * 1e3);
    r.comm_ms.push_back((prev - c0) * 1e3);
    r.start_s.push_back(t0);
    r.end_s.push_back(prev);
    for (std::size_t k = 0; k < nb; ++k) {
      const std::size_t b = nb - 1 - k;
      const float* out = result_of(send, recv, b);
      Deviation d;
      int flags = kUnchecked;
      if (opt_.check) {
        d = deviation(out, send[b].size(), nranks_, input_of[b]);
        flags = classify(rcs[b], infos[b], d);
        if (flags & kWrong) report_wrong(entry.name, ordinal[b], input_of[b], infos[b], d, out, rcs[b]);
      } else if (rcs[b] != MPI_SUCCESS) {
        flags |= kFailed | kWrong;
      }
      r.kind.push_back(infos[b].kind);
      r.flags.push_back(flags);
      r.rel_error.push_back(finite(d.relative()));
      r.bytes.push_back(buckets[b]);
      r.entries.push_back(infos[b].entries);
      r.dropped.push_back(infos[b].dropped_entries);
      // A failed call's buffer holds nothing agreed: it counts as failed, not as diverged (a call that
      // failed on some ranks only differs from the others' digests).
      r.digest.push_back(opt_.check && rcs[b] == MPI_SUCCESS ? digest(out, send[b].size()) : 0);
    }
  }
  combine(r);
  int ok = preparatory_ok ? 1 : 0;
  PMPI_Allreduce(MPI_IN_PLACE, &ok, 1, MPI_INT, MPI_MIN, comm_);
  r.failed = r.failed || !ok;
  return r;
}

int Runner::classify(int rc, const CallInfo& info, const Deviation& d) const {
  int flags = 0;
  if (!d.exact) flags |= kNotExact;
  if (d.relative() > opt_.tolerance) flags |= kBeyondTolerance;
  if (rc != MPI_SUCCESS) return flags | kFailed | kWrong;
  // Sums of small integers are exact in any order: whatever is not a bounded call (the MPI's own,
  // exact, calibration, fallback) must be exact to the last bit of every value. A bounded call that
  // reports no dropped entry may still differ by rounding (the Hadamard transform), not by more.
  if (info.kind != kBounded && !d.exact) flags |= kWrong;
  if (info.kind == kBounded && info.dropped_entries == 0 && (flags & kBeyondTolerance)) flags |= kWrong;
  return flags;
}

void Runner::report_wrong(const std::string& name, std::uint64_t call, std::uint64_t input, const CallInfo& info,
                          const Deviation& d, const float* out, int rc) {
  if (++wrong_reported_ > 5) return;
  if (rc != MPI_SUCCESS) {
    std::fprintf(stderr, "optireduce-bench: error: rank %d, %s, call %" PRIu64 ": MPI_Allreduce returned %d\n", rank_,
                 name.c_str(), call, rc);
    return;
  }
  std::fprintf(stderr,
               "optireduce-bench: error: rank %d, %s, call %" PRIu64 " (kind %s, %" PRIu64
               " dropped entries): wrong result: entry %zu is %.9g, exact %.9g; relative RMS error %.3g\n",
               rank_, name.c_str(), call, kind_name(info.kind), info.dropped_entries, d.first_bad,
               static_cast<double>(out[d.first_bad]), static_cast<double>(exact_entry(d.first_bad, nranks_, input)),
               d.relative());
}

std::uint64_t Runner::digest(const float* data, std::size_t count) {
  // FNV-1a over 64-bit words (a trailing odd float alone): bitwise equality, not strength.
  std::uint64_t h = 0xcbf29ce484222325ull;
  std::size_t i = 0;
  for (; i + 2 <= count; i += 2) {
    std::uint64_t w;
    std::memcpy(&w, data + i, sizeof w);
    h = (h ^ w) * 0x100000001b3ull;
  }
  if (i < count) {
    std::uint32_t w;
    std::memcpy(&w, data + i, sizeof w);
    h = (h ^ w) * 0x100000001b3ull;
  }
  return h;
}

// Every figure over ranks: latencies and errors the worst rank's, entries and drops summed, flags
// OR-ed. Kinds are agreed by the engine's ranks: rank 0's are kept.
void Runner::combine(EntryResult& r) {
  auto max_d = [&](std::vector<double>& v) {
    PMPI_Allreduce(MPI_IN_PLACE, v.data(), static_cast<int>(v.size()), MPI_DOUBLE, MPI_MAX, comm_);
  };
  max_d(r.iteration_ms);
  max_d(r.comm_ms);
  max_d(r.start_s);
  max_d(r.end_s);
  for (std::size_t i = 0; i < r.start_s.size(); ++i) r.after_last_entry_ms.push_back((r.end_s[i] - r.start_s[i]) * 1e3);
  max_d(r.call_ms);
  max_d(r.rel_error);
  // A result that is not bitwise the same on every rank: replicas apart, whatever the report says.
  std::vector<std::uint64_t> lowest = r.digest, highest = r.digest;
  PMPI_Allreduce(MPI_IN_PLACE, lowest.data(), static_cast<int>(lowest.size()), MPI_UINT64_T, MPI_MIN, comm_);
  PMPI_Allreduce(MPI_IN_PLACE, highest.data(), static_cast<int>(highest.size()), MPI_UINT64_T, MPI_MAX, comm_);
  for (std::size_t c = 0; c < r.flags.size(); ++c)
    if (lowest[c] != highest[c]) {
      r.flags[c] |= kDiverged | kWrong;
      if (rank_ == 0) std::fprintf(stderr, "optireduce-bench: error: %s, call %zu of the run: the result differs across ranks\n",
                                   r.entry.name.c_str(), c + 1);
    }
  PMPI_Allreduce(MPI_IN_PLACE, r.flags.data(), static_cast<int>(r.flags.size()), MPI_INT, MPI_BOR, comm_);
  PMPI_Allreduce(MPI_IN_PLACE, r.entries.data(), static_cast<int>(r.entries.size()), MPI_UINT64_T, MPI_SUM, comm_);
  PMPI_Allreduce(MPI_IN_PLACE, r.dropped.data(), static_cast<int>(r.dropped.size()), MPI_UINT64_T, MPI_SUM, comm_);
  PMPI_Bcast(r.kind.data(), static_cast<int>(r.kind.size()), MPI_INT, 0, comm_);
  for (int f : r.flags) r.failed = r.failed || (f & kWrong);
}

}  // namespace optireduce::bench
