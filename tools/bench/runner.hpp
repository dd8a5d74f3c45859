// Runs the entries of optireduce-bench on one communicator: warm-up and timed iterations, every
// call's result checked against the exact sum (inputs.hpp) and its kind read from the library
// (engine_probe.hpp), every figure combined over ranks.
#pragma once

#include <mpi.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "engine_probe.hpp"
#include "host_barrier.hpp"
#include "inputs.hpp"
#include "options.hpp"
#include "reduction.hpp"

namespace optireduce::bench {

// Per-call flags, OR-ed over ranks.
// kDiverged: the result is not bitwise the same on every rank (also wrong).
enum Flag : int { kNotExact = 1, kBeyondTolerance = 2, kWrong = 4, kFailed = 8, kUnchecked = 16, kDiverged = 32 };

// What one entry produced, already combined over ranks.
struct EntryResult {
  Entry entry;
  std::vector<double> iteration_ms;  // warm-up first, then timed
  std::vector<double> comm_ms;       // the iteration's calls only (model: without the compute sleep)
  // Per iteration: from the last rank's start to the last rank's end. The barrier before an
  // iteration releases ranks at different times when its own messages are delayed (a lossy
  // network); iteration_ms then includes that skew, this does not. Meaningful where the ranks
  // share one clock (one machine, network namespaces included).
  std::vector<double> after_last_entry_ms;
  std::vector<double> start_s, end_s;  // this rank's, MPI_Wtime
  // Per call, in the order the calls ran (a step's buckets in reverse order).
  std::vector<double> call_ms, rel_error;
  std::vector<int> kind, flags;
  std::vector<std::uint64_t> bytes, entries, dropped;
  std::vector<std::uint64_t> digest;  // this rank's result, hashed (combine compares them across ranks)
  int calls_per_iteration = 1;
  std::uint64_t preparatory_calls = 0;  // --warmup-calls, all size classes
  bool failed = false;                  // some call failed or was wrong
};

class Runner {
 public:
  // Throws std::runtime_error, on every rank alike, where --barrier host cannot be had.
  Runner(const Options& opt, MPI_Comm comm);
  int rank() const { return rank_; }
  int nranks() const { return nranks_; }
  const EngineProbe& probe() const { return probe_; }
  const Reduction& reduction() const { return reduction_; }

  EntryResult run(const Entry& entry);

 private:
  // Per bucket: the values filled and checked (float32), and for a 16-bit format the call's own
  // buffers; recv (and wire_recv) empty in place.
  using Bufs = std::vector<std::vector<float>>;
  using Wires = std::vector<std::vector<std::uint16_t>>;
  struct Buffers {
    Bufs send, recv;
    Wires wire_send, wire_recv;
  };
  static std::uint64_t digest(const float* data, std::size_t count);
  void barrier();
  std::size_t count(const Buffers& buf, std::size_t b) const { return buf.send[b].size(); }
  void fill(Buffers& buf, std::size_t b, std::uint64_t input);
  // One call of bucket b: returns its return code and records nothing.
  int call(Buffers& buf, std::size_t b);
  // After call(): this rank's result as float32 values (widened from the call's format).
  const float* result(Buffers& buf, std::size_t b);
  Deviation check(Buffers& buf, std::size_t b, std::uint64_t input, const float*& out);
  int classify(int rc, const CallInfo& info, const Deviation& d) const;
  void report_wrong(const std::string& name, std::uint64_t call, std::uint64_t input, std::size_t count,
                    const CallInfo& info, const Deviation& d, const float* out, int rc);
  bool run_preparatory(const Entry& entry, Buffers& buf);
  void combine(EntryResult& r);

  const Options& opt_;
  MPI_Comm comm_;
  int rank_ = 0, nranks_ = 0;
  EngineProbe probe_;
  Reduction reduction_;
  std::unique_ptr<optireduce::tools::HostBarrier> host_barrier_;
  std::uint64_t next_input_ = 0;  // input number of the next buffer filled (the "call" of the formula)
  std::uint64_t calls_ = 0;       // calls so far, from 1
  std::uint64_t calls_checked_ = 0;  // calls whose result was looked at (--corrupt-result counts these)
  int wrong_reported_ = 0;
};

}  // namespace optireduce::bench
