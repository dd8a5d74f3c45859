// What this CPU offers of the SIMD extensions the project's kernels are built for, read once.
// Every kernel dispatch (Hadamard transform, element formats, datagram tags) picks its level from
// it and never runs one the CPU lacks.
#pragma once

#include <algorithm>
#include <array>
#include <cstddef>

namespace optireduce {

struct CpuFeatures {
  bool avx2 = false, fma = false, f16c = false;
  bool avx512f = false, avx512bw = false, avx512vl = false;
};

inline const CpuFeatures& cpu_features() {
  static const CpuFeatures features = [] {
    __builtin_cpu_init();
    CpuFeatures f;
    f.avx2 = __builtin_cpu_supports("avx2");
    f.fma = __builtin_cpu_supports("fma");
    f.f16c = __builtin_cpu_supports("f16c");
    f.avx512f = __builtin_cpu_supports("avx512f");
    f.avx512bw = __builtin_cpu_supports("avx512bw");
    f.avx512vl = __builtin_cpu_supports("avx512vl");
    return f;
  }();
  return features;
}

// The three kernel sets of a dispatch, by a level enum ordered { scalar, <middle>, avx512 }: the
// best level this CPU runs, and the set for a requested level, lowered to that best.
template <typename Level, typename Kernels>
class KernelLevels {
  static_assert(Level::scalar == Level{0} && Level::avx512 == Level{2});

 public:
  KernelLevels(bool runs_middle, bool runs_avx512, Kernels scalar, Kernels middle, Kernels avx512)
      : best_(runs_avx512 ? Level::avx512 : runs_middle ? Level{1} : Level::scalar), sets_{scalar, middle, avx512} {}

  Level best() const { return best_; }
  const Kernels& at(Level asked) const {
    return sets_[static_cast<std::size_t>(std::clamp(asked, Level::scalar, best_))];
  }

 private:
  Level best_;
  std::array<Kernels, 3> sets_;
};

}  // namespace optireduce
