#include "optireduce/engine/hierarchy/host_sum.hpp"

#include "optireduce/elements/convert.hpp"

namespace optireduce {

void sum_host_parts(ElementFormat format, const std::vector<const void*>& parts, void* out, std::size_t n) {
  if (parts.empty() || n == 0) return;
  if (format != ElementFormat::float32) {
    WidenedSum sum;
    sum.format = format;
    sum.sources = parts.data();
    sum.count = static_cast<int>(parts.size());
    sum.rounded = out;
    sum_widened(sum, n);
    return;
  }
  auto* to = static_cast<float*>(out);
  const auto* first = static_cast<const float*>(parts[0]);
  for (std::size_t i = 0; i < n; ++i) to[i] = first[i];
  for (std::size_t k = 1; k < parts.size(); ++k) {
    const auto* from = static_cast<const float*>(parts[k]);
    for (std::size_t i = 0; i < n; ++i) to[i] += from[i];
  }
}

}  // namespace optireduce
