#include "reduction.hpp"

#include <immintrin.h>

#include <bit>
#include <stdexcept>

namespace optireduce::bench {

namespace {

float fp16_to_float(std::uint16_t h) { return static_cast<float>(std::bit_cast<_Float16>(h)); }
std::uint16_t float_to_fp16(float x) { return std::bit_cast<std::uint16_t>(static_cast<_Float16>(x)); }
float bf16_to_float(std::uint16_t h) { return std::bit_cast<float>(std::uint32_t{h} << 16); }
std::uint16_t float_to_bf16(float x) {
  const std::uint32_t u = std::bit_cast<std::uint32_t>(x);
  if ((u & 0x7FFFFFFFu) > 0x7F800000u) return static_cast<std::uint16_t>((u >> 16) | 0x40u);  // NaN stays one
  return static_cast<std::uint16_t>((u + 0x7FFFu + ((u >> 16) & 1u)) >> 16);             // nearest, ties to even
}

// The user functions of MPI_Op_create: inout[i] = in[i] + inout[i], widened and rounded once.
void fp16_sum_scalar(void* in, void* inout, int* len, MPI_Datatype*) {
  const auto* a = static_cast<const std::uint16_t*>(in);
  auto* b = static_cast<std::uint16_t*>(inout);
  for (int i = 0; i < *len; ++i) b[i] = float_to_fp16(fp16_to_float(a[i]) + fp16_to_float(b[i]));
}

__attribute__((target("avx,f16c"))) void fp16_sum_f16c(void* in, void* inout, int* len, MPI_Datatype*) {
  const auto* a = static_cast<const std::uint16_t*>(in);
  auto* b = static_cast<std::uint16_t*>(inout);
  const int n = *len;
  int i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 x = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(a + i)));
    const __m256 y = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(b + i)));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(b + i), _mm256_cvtps_ph(_mm256_add_ps(x, y), _MM_FROUND_TO_NEAREST_INT));
  }
  for (; i < n; ++i) b[i] = _cvtss_sh(_cvtsh_ss(a[i]) + _cvtsh_ss(b[i]), _MM_FROUND_TO_NEAREST_INT);
}

void bf16_sum(void* in, void* inout, int* len, MPI_Datatype*) {
  const auto* a = static_cast<const std::uint16_t*>(in);
  auto* b = static_cast<std::uint16_t*>(inout);
  for (int i = 0; i < *len; ++i) b[i] = float_to_bf16(bf16_to_float(a[i]) + bf16_to_float(b[i]));
}

}  // namespace

Format parse_format(const std::string& name) {
  if (name == "f32") return Format::f32;
  if (name == "bf16") return Format::bf16;
  if (name == "fp16") return Format::fp16;
  throw std::invalid_argument("--format \"" + name + "\": f32, bf16 or fp16");
}
Collective parse_collective(const std::string& name) {
  if (name == "allreduce") return Collective::allreduce;
  if (name == "reduce_scatter_block") return Collective::reduce_scatter_block;
  throw std::invalid_argument("--collective \"" + name + "\": allreduce or reduce_scatter_block");
}
const char* format_name(Format f) { return f == Format::f32 ? "f32" : f == Format::bf16 ? "bf16" : "fp16"; }
const char* collective_name(Collective c) {
  return c == Collective::allreduce ? "allreduce" : "reduce_scatter_block";
}

Reduction::Reduction(Format format, Collective collective, MPI_Comm comm)
    : format_(format), collective_(collective), comm_(comm) {
  MPI_Comm_rank(comm_, &rank_);
  MPI_Comm_size(comm_, &ranks_);
  if (format_ == Format::f32) return;
  MPI_Type_contiguous(2, MPI_BYTE, &type_);
  MPI_Type_commit(&type_);
  MPI_User_function* fn = &bf16_sum;
  if (format_ == Format::fp16) fn = __builtin_cpu_supports("f16c") ? &fp16_sum_f16c : &fp16_sum_scalar;
  MPI_Op_create(fn, 1, &op_);
}

std::size_t Reduction::result_count(std::size_t count) const {
  return collective_ == Collective::allreduce ? count : count / static_cast<std::size_t>(ranks_);
}
std::size_t Reduction::result_offset(std::size_t count) const {
  return collective_ == Collective::allreduce ? 0 : result_count(count) * static_cast<std::size_t>(rank_);
}
std::string Reduction::unfit_count(std::size_t count) const {
  if (collective_ == Collective::reduce_scatter_block && count % static_cast<std::size_t>(ranks_) != 0)
    return "reduce_scatter_block of " + std::to_string(count) + " elements: not a multiple of the " +
           std::to_string(ranks_) + " ranks";
  return "";
}

int Reduction::run(const void* send, void* recv, std::size_t count, bool in_place) const {
  const void* from = in_place ? MPI_IN_PLACE : send;
  if (collective_ == Collective::allreduce)
    return MPI_Allreduce(from, recv, static_cast<int>(count), type_, op_, comm_);
  return MPI_Reduce_scatter_block(from, recv, static_cast<int>(result_count(count)), type_, op_, comm_);
}

void Reduction::to_wire(const float* in, void* out, std::size_t n) const {
  auto* o = static_cast<std::uint16_t*>(out);
  if (format_ == Format::fp16)
    for (std::size_t i = 0; i < n; ++i) o[i] = float_to_fp16(in[i]);
  else
    for (std::size_t i = 0; i < n; ++i) o[i] = float_to_bf16(in[i]);
}
void Reduction::from_wire(const void* in, float* out, std::size_t n) const {
  const auto* h = static_cast<const std::uint16_t*>(in);
  if (format_ == Format::fp16)
    for (std::size_t i = 0; i < n; ++i) out[i] = fp16_to_float(h[i]);
  else
    for (std::size_t i = 0; i < n; ++i) out[i] = bf16_to_float(h[i]);
}

}  // namespace optireduce::bench
