#include "optireduce/elements/convert.hpp"

#include "optireduce/cpu_features.hpp"
#include "optireduce/elements/kernels.hpp"
#include "optireduce/enumerator_name.hpp"

namespace optireduce {

using namespace elements_detail;

const char* to_string(ConvertLevel level) { return enumerator_name(level, {"scalar", "f16c", "avx512"}); }

ConvertLevel best_convert_level() {
  const CpuFeatures& cpu = cpu_features();
  if (cpu.avx512f && cpu.avx512bw) return ConvertLevel::avx512;
  if (cpu.avx2 && cpu.f16c) return ConvertLevel::f16c;
  return ConvertLevel::scalar;
}

namespace {

const Kernels& kernels(ConvertLevel level) {
  static const Kernels scalar = scalar_kernels(), f16c = f16c_kernels(), avx512 = avx512_kernels();
  // Never run a level the CPU lacks, whatever was asked.
  const ConvertLevel best = best_convert_level();
  if (level == ConvertLevel::avx512 && best == ConvertLevel::avx512) return avx512;
  if (level != ConvertLevel::scalar && best != ConvertLevel::scalar) return f16c;
  return scalar;
}

}  // namespace

void widen(ElementFormat format, const void* in, float* out, std::size_t n, ConvertLevel level) {
  kernels(level).widen(format, in, out, n);
}

void narrow(ElementFormat format, const float* in, void* out, std::size_t n, ConvertLevel level) {
  kernels(level).narrow(format, in, out, n);
}

void sum_widened(const WidenedSum& sum, std::size_t n, ConvertLevel level) { kernels(level).sum_widened(sum, n); }

}  // namespace optireduce
