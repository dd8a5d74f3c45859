// What this CPU offers of the SIMD extensions the project's kernels are built for, read once.
// Every kernel dispatch (Hadamard transform, element formats, datagram tags) picks its level from
// it and never runs one the CPU lacks.
#pragma once

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

}  // namespace optireduce
