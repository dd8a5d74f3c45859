// The engine half of datagram_fuzz (engine_fuzz.cpp): the receive path feeding two real engines.
#pragma once

#include <vector>

#include "fuzz_input.hpp"

namespace optireduce::fuzz {

void run_engines(const Preamble& pre, const std::vector<Record>& records);

}  // namespace optireduce::fuzz
