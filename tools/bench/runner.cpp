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
}  // namespace

Runner::Runner(const Options& opt, MPI_Comm comm)
    : opt_(opt), comm_(comm), reduction_(opt.format, opt.collective, comm) {
  MPI_Comm_rank(comm_, &rank_);
  MPI_Comm_size(comm_, &nranks_);
  for (const auto& e : opt_.entries)
    for (auto bytes : e.buckets) {
      if (bytes % reduction_.element_bytes())
        throw std::runtime_error(e.name + ": " + std::to_string(bytes) + " bytes is not a whole number of " +
                                 format_name(opt_.format) + " elements");
      if (const auto why = reduction_.unfit_count(bytes / reduction_.element_bytes()); !why.empty())
        throw std::runtime_error(e.name + ": " + why);
    }
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

void Runner::fill(Buffers& buf, std::size_t b, std::uint64_t input) {
  fill_input(buf.send[b].data(), count(buf, b), rank_, input);
  if (!buf.wire_send[b].empty()) reduction_.to_wire(buf.send[b].data(), buf.wire_send[b].data(), count(buf, b));
}

int Runner::call(Buffers& buf, std::size_t b) {
  const bool wire = !buf.wire_send[b].empty();
  void* send = wire ? static_cast<void*>(buf.wire_send[b].data()) : buf.send[b].data();
  void* recv = opt_.in_place ? send : wire ? static_cast<void*>(buf.wire_recv[b].data()) : buf.recv[b].data();
  return reduction_.run(send, recv, count(buf, b), opt_.in_place);
}

const float* Runner::result(Buffers& buf, std::size_t b) {
  float* out = opt_.in_place ? buf.send[b].data() : buf.recv[b].data();
  if (!buf.wire_send[b].empty())
    reduction_.from_wire(opt_.in_place ? buf.wire_send[b].data() : buf.wire_recv[b].data(), out,
                         reduction_.result_count(count(buf, b)));
  // Test hook: one wrong value in one call's result, as a broken contender would return.
  if (calls_checked_++ + 1 == opt_.corrupt_call && rank_ == 0) out[0] += 1.0f;
  return out;
}

Deviation Runner::check(Buffers& buf, std::size_t b, std::uint64_t input, const float*& out) {
  out = result(buf, b);
  const std::size_t n = count(buf, b);
  return deviation(out, reduction_.result_count(n), nranks_, input, reduction_.result_offset(n));
}

// --warmup-calls untimed calls per size class (power-of-two byte range: the unit in which the
// engine calibrates its deadlines), cycling through the entry's bucket sizes of the class; each
// result checked like the others. Returns false when one was wrong.
bool Runner::run_preparatory(const Entry& entry, Buffers& buf) {
  std::map<int, std::vector<std::size_t>> classes;
  for (std::size_t b = 0; b < entry.buckets.size(); ++b)
    classes[static_cast<int>(std::floor(std::log2(static_cast<double>(entry.buckets[b]))))].push_back(b);
  bool ok = true;
  for (const auto& [cls, members] : classes) {
    for (int i = 0; i < entry.warmup_calls; ++i) {
      const std::size_t b = members[static_cast<std::size_t>(i) % members.size()];
      const std::uint64_t input = next_input_++;
      fill(buf, b, input);
      const int rc = call(buf, b);
      const CallInfo info = probe_.after_call(comm_);
      ++calls_;
      if (!opt_.check && rc == MPI_SUCCESS) {
        ++calls_checked_;
        continue;
      }
      const float* out = nullptr;
      const Deviation d = check(buf, b, input, out);
      if (classify(rc, info, d) & kWrong) {
        report_wrong(entry.name + " (warm-up call)", calls_, input, count(buf, b), info, d, out, rc);
        ok = false;
      }
    }
  }
  return ok;
}

EntryResult Runner::run(const Entry& entry) {
  const auto& buckets = entry.buckets;
  const std::size_t nb = buckets.size();
  Buffers buf{Bufs(nb), Bufs(nb), Wires(nb), Wires(nb)};
  const bool wire = reduction_.element_bytes() != 4;
  for (std::size_t b = 0; b < nb; ++b) {
    const std::size_t n = buckets[b] / reduction_.element_bytes(), out = reduction_.result_count(n);
    buf.send[b].assign(n, 0.0f);
    if (!opt_.in_place) buf.recv[b].assign(out, 0.0f);
    if (wire) buf.wire_send[b].assign(n, 0);
    if (wire && !opt_.in_place) buf.wire_recv[b].assign(out, 0);
  }
  EntryResult r;
  r.entry = entry;
  r.calls_per_iteration = static_cast<int>(nb);
  const std::uint64_t calls_before = calls_;
  const bool preparatory_ok = run_preparatory(entry, buf);
  r.preparatory_calls = calls_ - calls_before;
  const int iterations = opt_.warmup + opt_.iters;
  std::vector<std::uint64_t> input_of(nb);
  for (int it = 0; it < iterations; ++it) {
    // Inputs are written before the barrier: filling is the user's compute, not the reduction.
    for (std::size_t b = 0; b < nb; ++b) {
      input_of[b] = next_input_++;
      fill(buf, b, input_of[b]);
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
      rcs[b] = call(buf, b);
      const double t = MPI_Wtime();
      r.call_ms.push_back((t - prev) * 1e3);
      prev = t;
      infos[b] = probe_.after_call(comm_);
      ordinal[b] = ++calls_;
    }
    r.iteration_ms.push_back((prev - t0) * 1e3);
    r.comm_ms.push_back((prev - c0) * 1e3);
    r.start_s.push_back(t0);
    r.end_s.push_back(prev);
    for (std::size_t k = 0; k < nb; ++k) {
      const std::size_t b = nb - 1 - k;
      const float* out = nullptr;
      Deviation d;
      int flags = kUnchecked;
      if (!opt_.check) ++calls_checked_;
      if (opt_.check) {
        d = check(buf, b, input_of[b], out);
        flags = classify(rcs[b], infos[b], d);
        if (flags & kWrong) report_wrong(entry.name, ordinal[b], input_of[b], count(buf, b), infos[b], d, out, rcs[b]);
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
      // failed on some ranks only differs from the others' digests). Each rank's block of a
      // reduce-scatter is its own: only an allreduce's results must agree.
      const bool same_everywhere = opt_.collective == Collective::allreduce;
      r.digest.push_back(opt_.check && same_everywhere && rcs[b] == MPI_SUCCESS ? digest(out, count(buf, b)) : 0);
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

void Runner::report_wrong(const std::string& name, std::uint64_t call, std::uint64_t input, std::size_t n,
                          const CallInfo& info, const Deviation& d, const float* out, int rc) {
  if (++wrong_reported_ > 5) return;
  if (rc != MPI_SUCCESS) {
    std::fprintf(stderr, "optireduce-bench: error: rank %d, %s, call %" PRIu64 ": %s returned %d\n", rank_,
                 name.c_str(), call, collective_name(opt_.collective), rc);
    return;
  }
  std::fprintf(stderr,
               "optireduce-bench: error: rank %d, %s, call %" PRIu64 " (kind %s, %" PRIu64
               " dropped entries): wrong result: entry %zu is %.9g, exact %.9g; relative RMS error %.3g\n",
               rank_, name.c_str(), call, kind_name(info.kind), info.dropped_entries, d.first_bad,
               static_cast<double>(out[d.first_bad]),
               static_cast<double>(exact_entry(d.first_bad + reduction_.result_offset(n), nranks_, input)),
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
