// Google Benchmark of the randomized Hadamard transform: encode and decode, ns per float, for
// blocks 2^10 to 2^16, against memcpy of a buffer larger than the caches, on one core. Buffers
// are 64-byte aligned, as large framework tensors are (an unaligned output of the transform
// cannot use non-temporal stores and costs more).
//   build/bin/optireduce-hadamard-bench [--benchmark_filter=...]
#include <benchmark/benchmark.h>

#include <cstring>
#include <memory>
#include <new>

#include "optireduce/hadamard/hadamard.hpp"

namespace {

using optireduce::HadamardOptions;
using optireduce::SimdLevel;

constexpr std::size_t kFloats = std::size_t{16} << 20;  // 64 MiB: far beyond the caches

struct AlignedFree {
  void operator()(float* p) const { ::operator delete[](p, std::align_val_t{64}); }
};
using Buffer = std::unique_ptr<float[], AlignedFree>;

Buffer aligned_buffer(std::size_t n) {
  return Buffer(static_cast<float*>(::operator new[](n * sizeof(float), std::align_val_t{64})));
}

// Touched once, so that page faults stay out of the timed loops.
Buffer output_buffer() {
  Buffer out = aligned_buffer(kFloats);
  std::memset(out.get(), 0, kFloats * sizeof(float));
  return out;
}

const float* source() {
  static const Buffer v = [] {
    Buffer x = aligned_buffer(kFloats);
    for (std::size_t i = 0; i < kFloats; ++i) x[i] = static_cast<float>((i * 2654435761u) % 1000) * 1e-3f;
    return x;
  }();
  return v.get();
}

void report(benchmark::State& state) {
  state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations()) * static_cast<std::int64_t>(kFloats));
  state.counters["ns_per_float"] = benchmark::Counter(static_cast<double>(kFloats) * static_cast<double>(state.iterations()),
                                                      benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
}

void BM_Memcpy(benchmark::State& state) {
  const Buffer out = output_buffer();
  for (auto _ : state) {
    std::memcpy(out.get(), source(), kFloats * sizeof(float));
    benchmark::ClobberMemory();
  }
  report(state);
}

template <bool Encode>
void BM_Hadamard(benchmark::State& state) {
  HadamardOptions o;
  o.block_log2 = static_cast<unsigned>(state.range(0));
  o.simd = static_cast<SimdLevel>(state.range(1));
  const Buffer out = output_buffer();
  for (auto _ : state) {
    if (Encode) optireduce::hadamard_encode(source(), out.get(), kFloats, 12345, o);
    else optireduce::hadamard_decode(source(), out.get(), kFloats, 12345, o);
    benchmark::ClobberMemory();
  }
  state.SetLabel(std::string(optireduce::to_string(o.simd)) + " block 2^" + std::to_string(o.block_log2));
  report(state);
}

// The widest level at every size; the scalar reference (slow) at every other one.
void blocks(benchmark::internal::Benchmark* b) {
  for (int log2 = 10; log2 <= 16; ++log2) b->Args({log2, static_cast<int>(optireduce::best_simd_level())});
  for (int log2 = 10; log2 <= 16; log2 += 2) b->Args({log2, static_cast<int>(SimdLevel::scalar)});
}

BENCHMARK(BM_Memcpy)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_Hadamard<true>)->Name("BM_Encode")->Apply(blocks)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_Hadamard<false>)->Name("BM_Decode")->Apply(blocks)->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
