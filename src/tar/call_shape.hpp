// What a call computes: an allreduce, or a reduce-scatter (the scatter-reduce phase alone, each
// rank keeping the shard it owns), of one element format. Calibration keeps a size class per
// shape (deadlines/controller.hpp: call_class), and every message carries it (tar/wire_header.hpp).
#pragma once

#include <cstddef>
#include <cstdint>

#include "optireduce/elements/format.hpp"

namespace optireduce {

enum class Collective : std::uint8_t { allreduce = 0, reduce_scatter = 1 };
inline constexpr std::size_t kCollectives = 2;

// "allreduce", "reduce_scatter": the report's keys.
constexpr const char* to_string(Collective c) { return c == Collective::allreduce ? "allreduce" : "reduce_scatter"; }

struct CallShape {
  Collective collective = Collective::allreduce;
  ElementFormat format = ElementFormat::float32;

  // 0 for a float32 allreduce; one number per shape below kCallShapes.
  constexpr unsigned index() const {
    return static_cast<unsigned>(collective) * kElementFormats + static_cast<unsigned>(format);
  }
  constexpr std::size_t element_bytes() const { return optireduce::element_bytes(format); }
  constexpr bool scatter_only() const { return collective == Collective::reduce_scatter; }
  friend constexpr bool operator==(CallShape, CallShape) = default;
};
inline constexpr std::size_t kCallShapes = kCollectives * kElementFormats;

}  // namespace optireduce
