// 16-bit floats as a job sums them through MPI: widened to and rounded from float32 by plain C++
// (independent of the library's conversions), and the user op's function that sums fp16 (Horovod's
// recipe) or bf16 elements of a 2-byte datatype, for MPI_Op_create.
#pragma once

#include <mpi.h>

#include <bit>
#include <cstdint>

namespace mpitest {

enum class Half { float16, bfloat16 };

inline float widen(Half f, std::uint16_t h) {
  if (f == Half::bfloat16) return std::bit_cast<float>(std::uint32_t{h} << 16);
  return static_cast<float>(std::bit_cast<_Float16>(h));
}
inline std::uint16_t narrow(Half f, float x) {
  if (f == Half::float16) return std::bit_cast<std::uint16_t>(static_cast<_Float16>(x));
  const std::uint32_t u = std::bit_cast<std::uint32_t>(x);
  return static_cast<std::uint16_t>((u + 0x7FFFu + ((u >> 16) & 1u)) >> 16);  // nearest, ties to even
}

template <Half F>
void half_sum(void* in, void* inout, int* len, MPI_Datatype*) {
  const auto* a = static_cast<const std::uint16_t*>(in);
  auto* b = static_cast<std::uint16_t*>(inout);
  for (int i = 0; i < *len; ++i) b[i] = narrow(F, widen(F, a[i]) + widen(F, b[i]));
}

inline const char* name(Half f) { return f == Half::float16 ? "fp16" : "bf16"; }

}  // namespace mpitest
