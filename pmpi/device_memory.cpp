#include "device_memory.hpp"

#include <dlfcn.h>
#include <link.h>

#include <atomic>
#include <cstdint>

namespace optireduce::pmpi {
namespace {

// The driver API's own names and values (cuda.h), so no CUDA header is needed to build.
using CuPointerGetAttribute = int (*)(void* data, int attribute, std::uintptr_t pointer);
constexpr int kCudaSuccess = 0;
constexpr int kAttributeMemoryType = 2;  // CU_POINTER_ATTRIBUTE_MEMORY_TYPE
constexpr unsigned kMemoryTypeHost = 1;  // CU_MEMORYTYPE_HOST; device, array and unified are not

std::atomic<CuPointerGetAttribute> g_query{nullptr};
// How many objects the dynamic loader had loaded when the driver was last looked for in vain.
std::atomic<unsigned long long> g_looked_at{~0ull};
std::atomic<bool> g_on_some_rank{false};

// The loader's count of objects loaded so far: it moves when anything is dlopen'ed.
unsigned long long objects_loaded() {
  unsigned long long adds = 0;
  dl_iterate_phdr(
      [](dl_phdr_info* info, std::size_t, void* out) {
        *static_cast<unsigned long long*>(out) = info->dlpi_adds;
        return 1;  // the first object carries the count
      },
      &adds);
  return adds;
}

CuPointerGetAttribute find_query() {
  if (auto q = g_query.load(std::memory_order_acquire)) return q;
  // Looking costs a walk of every loaded object and, for the driver's name, open() calls along
  // the library path: once per call of a job without CUDA it was most of a small call's time.
  // Only a new object can bring the driver.
  const unsigned long long loaded = objects_loaded();
  if (g_looked_at.load(std::memory_order_acquire) == loaded) return nullptr;
  void* symbol = dlsym(RTLD_DEFAULT, "cuPointerGetAttribute");
  if (!symbol) {
    // The CUDA runtime opens the driver with RTLD_LOCAL: ask for it by name, never loading it.
    // The handle is kept, so the driver stays while its function is used.
    if (void* driver = dlopen("libcuda.so.1", RTLD_LAZY | RTLD_NOLOAD)) symbol = dlsym(driver, "cuPointerGetAttribute");
  }
  auto q = reinterpret_cast<CuPointerGetAttribute>(symbol);
  if (q) g_query.store(q, std::memory_order_release);
  else g_looked_at.store(loaded, std::memory_order_release);
  return q;
}

bool is_device(CuPointerGetAttribute query, const void* p) {
  if (!p || p == MPI_IN_PLACE) return false;
  unsigned type = 0;
  // Host memory the driver does not know returns an error: not device memory.
  return query(&type, kAttributeMemoryType, reinterpret_cast<std::uintptr_t>(p)) == kCudaSuccess && type != kMemoryTypeHost;
}

}  // namespace

bool cuda_driver_loaded() { return find_query() != nullptr; }

void set_driver_on_some_rank(bool loaded) { g_on_some_rank.store(loaded, std::memory_order_release); }

bool any_device_buffer(const void* sendbuf, const void* recvbuf, MPI_Comm comm) {
  const CuPointerGetAttribute query = find_query();
  if (!query && !g_on_some_rank.load(std::memory_order_acquire)) return false;
  int mine = query && (is_device(query, sendbuf) || is_device(query, recvbuf)) ? 1 : 0, any = mine;
  PMPI_Allreduce(&mine, &any, 1, MPI_INT, MPI_MAX, comm);
  return any != 0;
}

}  // namespace optireduce::pmpi
