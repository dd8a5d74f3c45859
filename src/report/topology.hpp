// Where this process runs, read from Linux's sysfs, for the report and optireduce-info.
#pragma once

#include <string>

namespace optireduce {

struct TopologySummary {
  int packages = 0;
  int cores = 0;
  int hardware_threads = 0;
  int numa_nodes = 0;
  int numa_node_of_thread = -1;  // NUMA node of the CPU the calling thread last ran on
  int cpu_of_thread = -1;
  std::string error;  // set when sysfs could not be read
};

TopologySummary read_topology();
// This host's name (gethostname): ranks whose names match share a host.
std::string host_name();

}  // namespace optireduce
