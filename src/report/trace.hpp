// OPTIREDUCE_TRACE: one line per engine call per rank, appended to one file shared by the ranks
// (columns: rank sequence entries kind status deadline_scatter_us deadline_gather_us scatter_us
// gather_us latency_us dropped_entries filled_entries transformed stall_us held),
// for plotting a run after the fact. Each line is a single write(2) to an O_APPEND descriptor, so
// lines of different ranks never interleave.
#pragma once

#include <string>

#include "optireduce/engine/report/call_stats.hpp"

namespace optireduce {

class CallTrace {
 public:
  ~CallTrace();
  // Returns false (and leaves tracing off) when the file cannot be opened.
  bool open(const std::string& path);
  bool enabled() const { return fd_ >= 0; }
  void write(int rank, const CallStats& call);
  void close();

 private:
  int fd_ = -1;
};

}  // namespace optireduce
