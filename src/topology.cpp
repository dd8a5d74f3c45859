#include "topology.hpp"

#include <hwloc.h>

namespace optireduce {

TopologySummary read_topology() {
  TopologySummary s;
  hwloc_topology_t topo;
  if (hwloc_topology_init(&topo) != 0) {
    s.error = "hwloc_topology_init failed";
    return s;
  }
  if (hwloc_topology_load(topo) != 0) {
    hwloc_topology_destroy(topo);
    s.error = "hwloc_topology_load failed";
    return s;
  }
  s.packages = hwloc_get_nbobjs_by_type(topo, HWLOC_OBJ_PACKAGE);
  s.cores = hwloc_get_nbobjs_by_type(topo, HWLOC_OBJ_CORE);
  s.hardware_threads = hwloc_get_nbobjs_by_type(topo, HWLOC_OBJ_PU);
  s.numa_nodes = hwloc_get_nbobjs_by_type(topo, HWLOC_OBJ_NUMANODE);
  hwloc_bitmap_t where = hwloc_bitmap_alloc();
  if (where && hwloc_get_last_cpu_location(topo, where, HWLOC_CPUBIND_THREAD) == 0) {
    s.cpu_of_thread = hwloc_bitmap_first(where);
    if (hwloc_obj_t pu = hwloc_get_pu_obj_by_os_index(topo, static_cast<unsigned>(s.cpu_of_thread))) {
      for (hwloc_obj_t obj = pu; obj; obj = obj->parent) {
        if (obj->memory_arity > 0) {
          // The first ancestor with memory children holds this PU's local NUMA node.
          hwloc_obj_t numa = obj->memory_first_child;
          while (numa && numa->type != HWLOC_OBJ_NUMANODE) numa = numa->memory_first_child;
          if (numa) s.numa_node_of_thread = static_cast<int>(numa->os_index);
          break;
        }
      }
    }
  }
  if (where) hwloc_bitmap_free(where);
  hwloc_topology_destroy(topo);
  return s;
}

}  // namespace optireduce
