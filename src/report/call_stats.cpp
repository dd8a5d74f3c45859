#include "optireduce/engine/report/call_stats.hpp"

namespace optireduce {

const char* to_string(CallKind k) {
  switch (k) {
    case CallKind::exact: return "exact";
    case CallKind::calibration: return "calibration";
    case CallKind::bounded: return "bounded";
    case CallKind::fallback: return "fallback";
    case CallKind::mpi: return "mpi";
  }
  return "?";
}

}  // namespace optireduce
