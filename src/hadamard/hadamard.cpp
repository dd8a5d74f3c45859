#include "optireduce/hadamard/hadamard.hpp"

#include <bit>
#include <cmath>
#include <vector>

#include "optireduce/cpu_features.hpp"
#include "optireduce/enumerator_name.hpp"
#include "optireduce/hadamard/kernels.hpp"

namespace optireduce {

using namespace hadamard_detail;

const char* to_string(SimdLevel level) { return enumerator_name(level, {"scalar", "avx2", "avx512"}); }

namespace {

std::uint64_t splitmix64(std::uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

const KernelLevels<SimdLevel, Kernels>& levels() {
  static const KernelLevels<SimdLevel, Kernels> levels(cpu_features().avx2 && cpu_features().fma,
                                                       cpu_features().avx512f && cpu_features().avx512vl,
                                                       scalar_kernels(), avx2_kernels(), avx512_kernels());
  return levels;
}

// ±1 for each of `n` coordinates, from the seed; cached per thread for the last (seed, n).
const float* signs(std::uint64_t seed, std::uint32_t n) {
  thread_local std::uint64_t cached_seed = 0;
  thread_local std::vector<float> cached;
  if (cached.size() != n || cached_seed != seed) {
    cached.resize(n);
    std::uint64_t bits = 0;
    for (std::uint32_t j = 0; j < n; ++j) {
      if (j % 64 == 0) bits = splitmix64(seed ^ (0x5bd1e995ull * (j / 64 + 1)));
      cached[j] = (bits >> (j % 64)) & 1 ? -1.0f : 1.0f;
    }
    cached_seed = seed;
  }
  return cached.data();
}

// Per thread, 64-byte aligned: the wide kernels keep whole cache lines in it.
float* scratch(std::uint32_t block) {
  constexpr std::size_t kLineFloats = 16;
  thread_local std::vector<float> buffer;
  const std::size_t need = scratch_floats(block) + kLineFloats;
  if (buffer.size() < need) buffer.resize(need);
  const auto misalignment = reinterpret_cast<std::uintptr_t>(buffer.data()) % 64;
  return buffer.data() + (misalignment ? (64 - misalignment) / sizeof(float) : 0);
}

template <bool Encode>
void transform(const float* in, float* out, std::uint64_t n, std::uint64_t seed, const HadamardOptions& options) {
  const Kernels& k = levels().at(options.simd);
  const std::uint32_t B = 1u << options.block_log2;
  const std::uint64_t blocks = n / B;
  if (blocks) {
    const Job job{in, out, blocks, B, signs(seed, B), 1.0f / std::sqrt(static_cast<float>(B)), scratch(B)};
    (Encode ? k.encode_blocks : k.decode_blocks)(job);
  }
  // The ragged tail: powers of two, largest first, each with its own signs.
  std::uint64_t offset = blocks * B;
  while (offset < n) {
    const auto size = static_cast<std::uint32_t>(std::bit_floor(n - offset));
    const float* s = signs(splitmix64(seed ^ size), size);
    const float scale = 1.0f / std::sqrt(static_cast<float>(size));
    (Encode ? k.encode_one : k.decode_one)(in + offset, out + offset, size, s, scale);
    offset += size;
  }
}

}  // namespace

SimdLevel best_simd_level() { return levels().best(); }

std::uint64_t hadamard_seed(std::uint64_t comm_id, std::uint64_t call, std::uint64_t range_index) {
  return splitmix64(splitmix64(comm_id ^ splitmix64(call)) ^ range_index);
}

void hadamard_encode(const float* in, float* out, std::uint64_t n, std::uint64_t seed, const HadamardOptions& options) {
  transform<true>(in, out, n, seed, options);
}

void hadamard_decode(const float* in, float* out, std::uint64_t n, std::uint64_t seed, const HadamardOptions& options) {
  transform<false>(in, out, n, seed, options);
}

}  // namespace optireduce
