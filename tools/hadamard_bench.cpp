// Google Benchmark of the randomized Hadamard transform: encode and decode, ns per float, for
// blocks 2^10 to 2^16, against memcpy of a buffer larger than the caches, on one core.
//   build/bin/optireduce-hadamard-bench [--benchmark_filter=...]
#include <benchmark/benchmark.h>

#include <cstring>
#include <vector>

#include "hadamard.hpp"

namespace {

using optireduce::HadamardOptions;
using optireduce::SimdLevel;

constexpr std::size_t kFloats = std::size_t{16} << 20;  // 64 MiB: far beyond the caches

std::vector<float>& source() {
  static std::vector<float> v = [] {
    std::vector<float> x(kFloats);
    for (std::size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>((i * 2654435761u) % 1000) * 1e-3f;
    return x;
  }();
  return v;
}

void report(benchmark::State& state) {
  state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations()) * static_cast<std::int64_t>(kFloats));
  state.counters["ns_per_float"] = benchmark::Counter(static_cast<double>(kFloats) * static_cast<double>(state.iterations()),
                                                      benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
}

void BM_Memcpy(benchmark::State& state) {
  std::vector<float> out(kFloats);
  for (auto _ : state) {
    std::memcpy(out.data(), source().data(), kFloats * sizeof(float));
    benchmark::ClobberMemory();
  }
  report(state);
}

template <bool Encode>
void BM_Hadamard(benchmark::State& state) {
  HadamardOptions o;
  o.block_log2 = static_cast<unsigned>(state.range(0));
  o.simd = static_cast<SimdLevel>(state.range(1));
  std::vector<float> out(kFloats);
  for (auto _ : state) {
    if (Encode) optireduce::hadamard_encode(source().data(), out.data(), kFloats, 12345, o);
    else optireduce::hadamard_decode(source().data(), out.data(), kFloats, 12345, o);
    benchmark::ClobberMemory();
  }
  state.SetLabel(std::string(optireduce::to_string(o.simd)) + " block 2^" + std::to_string(o.block_log2));
  report(state);
}

void blocks(benchmark::internal::Benchmark* b) {
  for (int simd : {static_cast<int>(SimdLevel::scalar), static_cast<int>(optireduce::best_simd_level())})
    for (int log2 = 10; log2 <= 16; log2 += 2) b->Args({log2, simd});
}

BENCHMARK(BM_Memcpy)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_Hadamard<true>)->Name("BM_Encode")->Apply(blocks)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_Hadamard<false>)->Name("BM_Decode")->Apply(blocks)->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
