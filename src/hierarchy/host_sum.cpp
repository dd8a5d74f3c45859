#include "optireduce/engine/hierarchy/host_sum.hpp"

#include "optireduce/elements/convert.hpp"
#include "optireduce/engine/tar/float_sum.hpp"

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
  sum_in_order(parts.data(), static_cast<int>(parts.size()), static_cast<float*>(out), nullptr, n);
}

}  // namespace optireduce
