// What a launcher says about itself (`mpirun --version`, `srun --mpi=list`), asked before the job
// starts: stdout and stderr together, stdin /dev/null, 10 s at most.
#pragma once

#include <string>

namespace optireduce::tools {

struct Probe {
  bool ran = false;    // it ran and exited (whatever its status) within the time
  std::string output;  // stdout and stderr, at most 1 MiB
  std::string error;   // why it did not run
};

Probe run_probe(const std::string& program, const char* argument);

}  // namespace optireduce::tools
