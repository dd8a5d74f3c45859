/* A stand-in for the CUDA driver, built as libcuda.so.1 (there is no GPU here): it exports the
 * one driver function the library asks, cuPointerGetAttribute, and claims that pointers inside
 * the ranges a test registered with standin_cuda_claim() are device memory. Everything else is
 * unknown to it, as host memory is to the real driver. */
#include <stddef.h>
#include <stdint.h>

enum { kMaxRanges = 8, kAttributeMemoryType = 2, kMemoryTypeDevice = 2, kErrorInvalidValue = 1 };

static struct {
  uintptr_t begin, end;
} g_ranges[kMaxRanges];
static int g_count;
static unsigned long g_queries;

void standin_cuda_claim(const void* p, size_t bytes) {
  if (g_count < kMaxRanges) {
    g_ranges[g_count].begin = (uintptr_t)p;
    g_ranges[g_count].end = (uintptr_t)p + bytes;
    ++g_count;
  }
}

void standin_cuda_release_all(void) { g_count = 0; }

unsigned long standin_cuda_queries(void) { return g_queries; }

int cuPointerGetAttribute(void* data, int attribute, unsigned long long pointer) {
  ++g_queries;
  if (attribute != kAttributeMemoryType) return kErrorInvalidValue;
  for (int i = 0; i < g_count; ++i)
    if (pointer >= g_ranges[i].begin && pointer < g_ranges[i].end) {
      *(unsigned*)data = kMemoryTypeDevice;
      return 0;
    }
  return kErrorInvalidValue;
}
