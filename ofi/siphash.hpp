// SipHash-2-4 (Aumasson and Bernstein): a keyed 64-bit tag, fast on short inputs. The datagram
// transport tags every header with it so that nobody outside the job can feed the engine data.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>

namespace optireduce::ofi {

using SipKey = std::array<std::uint64_t, 2>;

std::uint64_t siphash24(const SipKey& key, std::span<const std::byte> data);

}  // namespace optireduce::ofi
