#include "planned_call.hpp"

#include <cstring>

#include "optireduce/elements/convert.hpp"

namespace optireduce::schedules {

namespace {

// Elements past a result that is not written in place, which must stay as they were.
constexpr std::uint64_t kGuard = 8;

float value(int rank, int ranks, int call, std::uint64_t i) { return static_cast<float>(1 << rank) * factor(call, i, ranks); }

std::size_t bytes_per_entry(const PlannedCall& planned) { return element_bytes(planned.shape.format); }

}  // namespace

float factor(int call, std::uint64_t i, int ranks) {
  const std::uint64_t most = ranks <= 4 ? 13 : 256 / ((1u << ranks) - 1);
  return static_cast<float>(1 + (i * 7 + static_cast<std::uint64_t>(call) * 3) % most);
}

std::uint64_t result_entries(const PlannedCall& planned, int rank) {
  return planned.shape.scatter_only() ? planned.blocks[static_cast<std::size_t>(rank)] : planned.count;
}

std::uint64_t first_entry(const PlannedCall& planned, int rank) {
  std::uint64_t first = 0;
  if (planned.shape.scatter_only())
    for (int p = 0; p < rank; ++p) first += planned.blocks[static_cast<std::size_t>(p)];
  return first;
}

CallStats run_planned_call(Engine& engine, const PlannedCall& planned, int call, CallBuffers& buffers) {
  const int rank = engine.rank();
  const std::uint64_t count = planned.count;
  const std::size_t eb = bytes_per_entry(planned);
  const ElementFormat format = planned.shape.format;
  std::vector<float> values(count);
  for (std::uint64_t i = 0; i < count; ++i) values[i] = value(rank, engine.ranks(), call, i);
  std::vector<std::byte> in(count * eb);
  if (format == ElementFormat::float32) std::memcpy(in.data(), values.data(), in.size());
  else narrow(format, values.data(), in.data(), count);
  const bool in_place = call % 2;
  // Not in place: the result and a guard after it, all NaN (0xff bytes, in every format).
  if (in_place) buffers.out = std::move(in);
  else buffers.out.assign((result_entries(planned, rank) + kGuard) * eb, std::byte{0xff});
  const std::size_t result_bytes = result_entries(planned, rank) * eb;
  buffers.tail.assign(buffers.out.begin() + static_cast<std::ptrdiff_t>(result_bytes), buffers.out.end());
  const void* input = in_place ? buffers.out.data() : in.data();
  if (planned.shape.scatter_only()) return engine.reduce_scatter(input, buffers.out.data(), planned.blocks, format, planned.bounded);
  return engine.allreduce(input, buffers.out.data(), count, format, planned.bounded);
}

float result_value(const PlannedCall& planned, const CallBuffers& buffers, std::uint64_t i) {
  float x = 0;
  if (planned.shape.format == ElementFormat::float32) std::memcpy(&x, buffers.out.data() + 4 * i, 4);
  else widen(planned.shape.format, buffers.out.data() + 2 * i, &x, 1);
  return x;
}

bool tail_intact(const PlannedCall& planned, int rank, const CallBuffers& buffers) {
  const std::size_t result_bytes = result_entries(planned, rank) * bytes_per_entry(planned);
  return buffers.out.size() == result_bytes + buffers.tail.size() &&
         std::memcmp(buffers.out.data() + result_bytes, buffers.tail.data(), buffers.tail.size()) == 0;
}

}  // namespace optireduce::schedules
