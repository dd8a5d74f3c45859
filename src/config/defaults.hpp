// Every default of the engine's settings, stated once: the configuration table (config/tables.cpp)
// prints and applies these, and EngineOptions starts from them.
#pragma once

#include <cstdint>

namespace optireduce::defaults {

inline constexpr std::uint64_t kMinBytes = 1u << 20;
inline constexpr std::uint64_t kChunkBytes = 1u << 20;  // what one UCX message carries; datagrams cut it
inline constexpr std::uint64_t kTimeoutMs = 60000;       // hard cap of a bounded call's deadlines
inline constexpr std::uint64_t kWatchdogMs = 600000;     // an exact wait gives up after this
inline constexpr double kLossBudget = 0.10;
inline constexpr unsigned kCalibrationCalls = 20;
inline constexpr unsigned kResendRounds = 2;         // requests per phase and peer for lost datagrams
inline constexpr unsigned kReliableCallsAfterOverrun = 16;
inline constexpr unsigned kSyncInterval = 8;             // bounded calls between two loss agreements
inline constexpr unsigned kHadamardBlockLog2 = 12;
inline constexpr std::uint64_t kFaultSeed = 1;

}  // namespace optireduce::defaults
