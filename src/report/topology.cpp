#include "optireduce/engine/report/topology.hpp"

#include <dirent.h>
#include <sched.h>
#include <unistd.h>

#include <cstring>
#include <fstream>
#include <set>
#include <utility>

namespace optireduce {
namespace {

constexpr const char* kCpus = "/sys/devices/system/cpu";
constexpr const char* kNodes = "/sys/devices/system/node";

// Numbers n of the entries "<prefix><n>" of a sysfs folder.
std::set<int> numbered_entries(const char* dir, const char* prefix) {
  std::set<int> out;
  if (DIR* d = opendir(dir)) {
    const std::size_t n = std::strlen(prefix);
    while (dirent* e = readdir(d)) {
      if (std::strncmp(e->d_name, prefix, n) != 0 || e->d_name[n] < '0' || e->d_name[n] > '9') continue;
      out.insert(std::atoi(e->d_name + n));
    }
    closedir(d);
  }
  return out;
}

int read_int(const std::string& path) {
  int v = -1;
  std::ifstream(path) >> v;
  return v;
}

}  // namespace

std::string host_name() {
  char name[256] = {};
  gethostname(name, sizeof name - 1);
  return name;
}

TopologySummary read_topology() {
  TopologySummary s;
  const auto cpus = numbered_entries(kCpus, "cpu");
  std::set<int> packages;
  std::set<std::pair<int, int>> cores;
  for (int cpu : cpus) {
    const std::string base = std::string(kCpus) + "/cpu" + std::to_string(cpu) + "/topology/";
    const int package = read_int(base + "physical_package_id");
    const int core = read_int(base + "core_id");
    if (package < 0 || core < 0) continue;
    ++s.hardware_threads;
    packages.insert(package);
    cores.insert({package, core});
  }
  if (s.hardware_threads == 0) {
    s.error = std::string("no CPU topology under ") + kCpus;
    return s;
  }
  s.packages = static_cast<int>(packages.size());
  s.cores = static_cast<int>(cores.size());
  const auto nodes = numbered_entries(kNodes, "node");
  s.numa_nodes = nodes.empty() ? 1 : static_cast<int>(nodes.size());
  s.cpu_of_thread = sched_getcpu();
  for (int node : nodes)
    if (s.cpu_of_thread >= 0 &&
        access((std::string(kNodes) + "/node" + std::to_string(node) + "/cpu" + std::to_string(s.cpu_of_thread)).c_str(), F_OK) == 0)
      s.numa_node_of_thread = node;
  if (nodes.empty()) s.numa_node_of_thread = 0;
  return s;
}

}  // namespace optireduce
