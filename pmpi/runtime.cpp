#include "runtime.hpp"

#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <mutex>

#include "comm_engines.hpp"
#include "device_memory.hpp"
#include "loaded_everywhere.hpp"
#include "mpi_bootstrap.hpp"
#include "optireduce/engine.h"
#include "optireduce/log.hpp"

namespace optireduce::pmpi {
namespace {

std::mutex g_lifecycle;
bool g_initialized = false;
bool g_finalized = false;
std::atomic<bool> g_active{false};
std::atomic<bool> g_initialized_flag{false};
thread_local int t_nesting = 0;

constexpr std::uint32_t kCudaFlag = 1;  // a CUDA driver is loaded in this process

[[noreturn]] void end_job() {
  // Every rank took the same decision from the same all-gather, so all of them leave here.
  std::fflush(stderr);
  PMPI_Finalize();
  _exit(1);
}

// MPI_COMM_WORLD's bootstrap for one collective of optireduce_init or optireduce_finalize.
struct World {
  optireduce_bootstrap bootstrap = mpi_bootstrap(MPI_COMM_WORLD);
  ~World() { bootstrap.release(bootstrap.context); }
};

}  // namespace

NestedCallGuard::NestedCallGuard() { ++t_nesting; }
NestedCallGuard::~NestedCallGuard() { --t_nesting; }
bool NestedCallGuard::nested() { return t_nesting > 0; }

bool active() { return g_active.load(std::memory_order_acquire); }
bool initialized() { return g_initialized_flag.load(std::memory_order_acquire); }

void after_init() {
  std::lock_guard lock(g_lifecycle);
  if (g_initialized) return;
  g_initialized = true;
  // A rank without the library would leave the others waiting in optireduce_init's all-gather.
  if (!loaded_everywhere()) PMPI_Abort(MPI_COMM_WORLD, 1);
  std::uint32_t flags = 0;
  char error[1024];
  int rc = OPTIREDUCE_INVALID;
  {
    World world;
    rc = optireduce_init(&world.bootstrap, cuda_driver_loaded() ? kCudaFlag : 0, &flags, error, sizeof error);
  }
  if (rc != OPTIREDUCE_OK) {
    // Only the rank the line is about has it.
    if (error[0]) std::fprintf(stderr, "optireduce: %s\n", error);
    end_job();
  }
  set_driver_on_some_rank(flags & kCudaFlag);
  if (flags & kCudaFlag) OR_LOG(debug, "a CUDA driver is loaded on some rank: device buffers pass through");
  setup_comm_engines();
  g_initialized_flag.store(true, std::memory_order_release);
  // Off still interposes (so a communicator can opt in with MPI_Comm_set_info) but by default
  // every call passes through.
  g_active.store(true, std::memory_order_release);
}

void before_finalize() {
  std::lock_guard lock(g_lifecycle);
  if (!g_initialized || g_finalized) return;
  g_finalized = true;
  g_active.store(false, std::memory_order_release);
  g_initialized_flag.store(false, std::memory_order_release);
  // Every rank has finished its last engine call before any endpoint closes.
  PMPI_Barrier(MPI_COMM_WORLD);
  teardown_comm_engines();
  World world;
  optireduce_finalize(&world.bootstrap);
}

}  // namespace optireduce::pmpi
