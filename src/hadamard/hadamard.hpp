// Randomized Hadamard transform that turns lost chunks into small, spread-out noise.
//
// A range of floats is cut into blocks of B = 2^k (a ragged tail is cut into smaller powers of
// two, largest first, so no padding and no extra copy). Each block is multiplied by random ±1
// signs D and by the normalised Walsh-Hadamard matrix H/sqrt(B): orthonormal, so the inverse is
// D H / sqrt(B) and norms are preserved. It is linear, so ranks reduce in the transformed domain
// and decode once.
//
// Spreading: the full blocks of a range are stored interleaved, coordinate-major
// (out[j * blocks + b] = coordinate j of block b), so one contiguous chunk of the encoded range
// holds a few coordinates of many blocks. Losing it removes a thin slice from each of those
// blocks, which the inverse transform turns into small noise over all their coordinates, instead
// of zeroing a contiguous run of one layer.
#pragma once

#include <cstdint>
#include <string>

namespace optireduce {

enum class SimdLevel { scalar, avx2, avx512 };
const char* to_string(SimdLevel level);
// The widest level this CPU runs.
SimdLevel best_simd_level();

struct HadamardOptions {
  unsigned block_log2 = 12;                 // B = 4096 floats = 16 KiB, resident in L1/L2
  SimdLevel simd = best_simd_level();
};

// The ±1 signs are drawn from `seed`: every rank derives the same seed from the communicator and
// the call, so no message carries them.
std::uint64_t hadamard_seed(std::uint64_t comm_id, std::uint64_t call, std::uint64_t range_index);

// out = encoded(in), n floats; in and out must not overlap.
void hadamard_encode(const float* in, float* out, std::uint64_t n, std::uint64_t seed, const HadamardOptions& options);
// out = decoded(in), n floats; in and out must not overlap.
void hadamard_decode(const float* in, float* out, std::uint64_t n, std::uint64_t seed, const HadamardOptions& options);

}  // namespace optireduce
