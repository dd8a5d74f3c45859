// The inputs of optireduce-bench and the exact result they must sum to.
//
// Every rank fills entry i of call c with a small integer that depends on (rank, i, c). Sums of
// small integers are exact in float32 in any order, so the exact result is known without any
// communication and every contender (Open MPI, Gloo, the engine in any mode) must return it
// exactly, except where a bounded call reports that it dropped contributions. "Exactly" compares
// values: -0 equals +0 (the Hadamard transform's sign flips turn some zero sums into -0). The value changes
// from call to call, so a contender that leaves a buffer unwritten or returns an earlier call's
// result is caught too. scripts/bench/gloo_bench.py implements the same formula: keep
// them in step.
//
//   key(i, c)        = (7 i + 13 floor(i / 4096) + 5 c) mod 33
//   input(r, i, c)   = ((key(i, c) + 3 r) mod 33) - 16            in [-16, 16]
//   exact(i, c)      = sum over ranks r of input(r, i, c)         = table[key(i, c)]
//
// The floor(i / 4096) term breaks the period of 33 entries at every 4096, so a chunk written at
// the wrong offset does not happen to hold the right values.
#ifndef OPTIREDUCE_TOOLS_BENCH_INPUTS_HPP
#define OPTIREDUCE_TOOLS_BENCH_INPUTS_HPP

#include <array>
#include <cmath>
#include <cstdint>
#include <vector>

namespace optireduce::bench {

constexpr unsigned kPeriod = 33;

// Walks key(i, c) for i = 0, 1, ... without a division per entry.
class KeyWalk {
 public:
  // From entry `first` on.
  explicit KeyWalk(std::uint64_t call, std::size_t first = 0)
      : key_(static_cast<unsigned>((7 * (first % kPeriod) + 13 * ((first / 4096) % kPeriod) + 5 * (call % kPeriod)) % kPeriod)),
        i_(static_cast<unsigned>(first % 4096)) {}
  unsigned next() {
    const unsigned k = key_;
    key_ += 7;
    if (++i_ == 4096) i_ = 0, key_ += 13;
    while (key_ >= kPeriod) key_ -= kPeriod;
    return k;
  }

 private:
  unsigned key_;
  unsigned i_;
};

inline void fill_input(float* out, std::size_t n, int rank, std::uint64_t call) {
  std::array<float, kPeriod> value{};
  for (unsigned k = 0; k < kPeriod; ++k)
    value[k] = static_cast<float>(static_cast<int>((k + 3 * static_cast<unsigned>(rank)) % kPeriod) - 16);
  KeyWalk key(call);
  for (std::size_t i = 0; i < n; ++i) out[i] = value[key.next()];
}

// How far one rank's result is from the exact sum.
struct Deviation {
  bool exact = true;          // every entry equal to the exact sum (by value: -0 == +0; NaN never)
  double rms_error = 0;       // sqrt(mean((result - exact)^2))
  double rms_exact = 0;       // sqrt(mean(exact^2))
  double max_abs_error = 0;
  std::size_t first_bad = 0;  // when !exact: the first entry that differs
  // Relative to the exact result's RMS, the figure a loss budget is stated in; the absolute one
  // when the exact result is all zeros.
  double relative() const { return rms_exact > 0 ? rms_error / rms_exact : rms_error; }
};

// result[i] is entry first + i of the sum (a reduce-scatter's block starts at its offset).
inline Deviation deviation(const float* result, std::size_t n, int nranks, std::uint64_t call, std::size_t first = 0) {
  std::array<float, kPeriod> exact{};
  for (unsigned k = 0; k < kPeriod; ++k) {
    int s = 0;
    for (int r = 0; r < nranks; ++r) s += static_cast<int>((k + 3 * static_cast<unsigned>(r)) % kPeriod) - 16;
    exact[k] = static_cast<float>(s);
  }
  Deviation d;
  double err2 = 0, exact2 = 0;
  KeyWalk key(call, first);
  for (std::size_t i = 0; i < n; ++i) {
    const float e = exact[key.next()];
    const float got = result[i];
    exact2 += static_cast<double>(e) * e;
    if (got == e) continue;
    if (d.exact) d.exact = false, d.first_bad = i;
    const double diff = std::isfinite(got) ? static_cast<double>(got) - e : INFINITY;
    err2 += diff * diff;
    d.max_abs_error = std::max(d.max_abs_error, std::fabs(diff));
  }
  if (n) {
    d.rms_error = std::sqrt(err2 / static_cast<double>(n));
    d.rms_exact = std::sqrt(exact2 / static_cast<double>(n));
  }
  return d;
}

// The exact value of entry i of call c (for error messages).
inline float exact_entry(std::size_t i, int nranks, std::uint64_t call) {
  const unsigned k = static_cast<unsigned>((7 * (i % kPeriod) + 13 * ((i / 4096) % kPeriod) + 5 * (call % kPeriod)) % kPeriod);
  int s = 0;
  for (int r = 0; r < nranks; ++r) s += static_cast<int>((k + 3 * static_cast<unsigned>(r)) % kPeriod) - 16;
  return static_cast<float>(s);
}

}  // namespace optireduce::bench

#endif
