// The library's side of logging: where its lines (and its modules' lines) go, at which level,
// with which rank. OR_LOG itself is in optireduce/log.hpp.
#pragma once

#include "optireduce/log.hpp"

namespace optireduce {

const char* to_string(LogLevel level);
void set_log_level(LogLevel level);
// Rank shown in every line; -1 before it is known. Also installs the line writer.
void set_log_rank(int rank);

}  // namespace optireduce
