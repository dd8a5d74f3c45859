// A Horovod-shaped job: MPI initialised with MPI_THREAD_MULTIPLE, one background thread that owns
// all communication, and a main thread that computes. The main thread produces each step's
// gradient tensors (sizes from 1 K to 700 K floats, last layer first, as a backward pass does) and
// enqueues them while it goes on computing; the background thread wakes every cycle, agrees with
// the other ranks how many queued tensors every rank has ready (a small MPI_Allreduce MIN, as
// Horovod's coordinator does), packs them in order into fusion buffers of at most --threshold
// bytes and reduces each buffer with one in-place MPI_Allreduce(MPI_FLOAT, MPI_SUM): fused
// buffers of varying size, some below the library's default 1 MiB (they pass through), most above.
// The main thread waits for its tensors and checks every entry: the values are small integers, so
// every exact summation order gives the same bits.
//
// --fp16: Horovod's fp16 compression: each fusion buffer travels as IEEE half precision, reduced
// with Horovod's own datatype and op (MPI_Type_contiguous(2, MPI_BYTE) and an MPI_Op_create'd
// float16 sum) instead of MPI_FLOAT and MPI_SUM. The small integers are exact in fp16 too.
//
//   mpirun -np 4 horovod_like [--steps 20] [--threshold 4194304] [--cycle-ms 1] [--tolerate F]
//                             [--fp16] [--expect-engine]
//
// --tolerate F: a bounded-time reduction may estimate a few entries; accept up to this fraction of
// wrong entries (default 0: every entry exact). --expect-engine: fail unless a preloaded
// liboptireduce.so (looked up with dlsym) intercepted some of the fused reductions.
#include <dlfcn.h>
#include <mpi.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "optireduce/optireduce.h"

namespace {

struct Options {
  int steps = 20;
  long threshold = 4L << 20;
  int cycle_ms = 1;
  double tolerate = 0;
  bool expect_engine = false;
  bool fp16 = false;
};

// Horovod's float16_sum (horovod/common/half.cc): widen, add in float32, round back.
void float16_sum(void* invec, void* inoutvec, int* len, MPI_Datatype*) {
  const auto* in = static_cast<const _Float16*>(invec);
  auto* inout = static_cast<_Float16*>(inoutvec);
  for (int i = 0; i < *len; ++i) inout[i] = static_cast<_Float16>(static_cast<float>(in[i]) + static_cast<float>(inout[i]));
}

// What a fused reduction is made of: MPI_FLOAT and MPI_SUM, or Horovod's fp16 datatype and op.
struct Wire {
  MPI_Datatype datatype = MPI_FLOAT;
  MPI_Op op = MPI_SUM;
  std::size_t bytes = sizeof(float);
};

// One gradient tensor: reduced in place, then handed back.
struct Tensor {
  std::vector<float> data;
  bool done = false;
};

// Horovod's queue of tensors waiting for the background thread.
class Queue {
 public:
  void push(Tensor* t) {
    std::lock_guard<std::mutex> lock(mu_);
    pending_.push_back(t);
  }
  std::size_t ready() {
    std::lock_guard<std::mutex> lock(mu_);
    return pending_.size();
  }
  std::vector<Tensor*> take(std::size_t n) {
    std::lock_guard<std::mutex> lock(mu_);
    std::vector<Tensor*> out(pending_.begin(), pending_.begin() + static_cast<std::ptrdiff_t>(n));
    pending_.erase(pending_.begin(), pending_.begin() + static_cast<std::ptrdiff_t>(n));
    return out;
  }
  void complete(const std::vector<Tensor*>& ts) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      for (Tensor* t : ts) t->done = true;
    }
    cv_.notify_all();
  }
  void wait(Tensor* t) {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [t] { return t->done; });
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Tensor*> pending_;
};

// The layer sizes of a small model, in floats; each step reverses them like a backward pass.
const std::vector<int> kLayers = {700000, 1000, 300000, 512, 120000, 65536, 250000, 4096, 500000, 10};

float value(int step, int tensor, std::size_t i, int rank) {
  return static_cast<float>(static_cast<int>((i * 7 + static_cast<std::size_t>(tensor) * 3 + step + rank) % 13) - 6);
}

// The background thread: every communication call of the job is made here.
struct Communicator {
  MPI_Comm comm;
  Queue& queue;
  long threshold;
  int cycle_ms;
  int total_tensors;
  Wire wire;
  std::vector<float> fusion;
  std::vector<_Float16> fusion16;  // --fp16: what crosses the network
  long fused_calls = 0, min_bytes = -1, max_bytes = 0;

  void run() {
    int processed = 0;
    while (processed < total_tensors) {
      std::this_thread::sleep_for(std::chrono::milliseconds(cycle_ms));
      // Negotiation: reduce only what every rank has ready, in the same order everywhere.
      int ready = static_cast<int>(queue.ready());
      MPI_Allreduce(MPI_IN_PLACE, &ready, 1, MPI_INT, MPI_MIN, comm);
      if (ready == 0) continue;
      std::vector<Tensor*> batch = queue.take(static_cast<std::size_t>(ready));
      for (std::size_t first = 0; first < batch.size();) {
        std::size_t last = first, floats = 0;
        while (last < batch.size() &&
               (last == first || static_cast<long>((floats + batch[last]->data.size()) * sizeof(float)) <= threshold))
          floats += batch[last++]->data.size();
        reduce(std::vector<Tensor*>(batch.begin() + static_cast<std::ptrdiff_t>(first),
                                    batch.begin() + static_cast<std::ptrdiff_t>(last)),
               floats);
        first = last;
      }
      processed += ready;
    }
  }

  // One fused, in-place reduction of consecutive tensors.
  void reduce(const std::vector<Tensor*>& group, std::size_t floats) {
    if (fusion.size() < floats) fusion.resize(floats);
    std::size_t offset = 0;
    for (Tensor* t : group) {
      std::memcpy(&fusion[offset], t->data.data(), t->data.size() * sizeof(float));
      offset += t->data.size();
    }
    if (wire.bytes == 2) {
      fusion16.resize(std::max(fusion16.size(), floats));
      for (std::size_t i = 0; i < floats; ++i) fusion16[i] = static_cast<_Float16>(fusion[i]);
      MPI_Allreduce(MPI_IN_PLACE, fusion16.data(), static_cast<int>(floats), wire.datatype, wire.op, comm);
      for (std::size_t i = 0; i < floats; ++i) fusion[i] = static_cast<float>(fusion16[i]);
    } else {
      MPI_Allreduce(MPI_IN_PLACE, fusion.data(), static_cast<int>(floats), wire.datatype, wire.op, comm);
    }
    offset = 0;
    for (Tensor* t : group) {
      std::memcpy(t->data.data(), &fusion[offset], t->data.size() * sizeof(float));
      offset += t->data.size();
    }
    const long bytes = static_cast<long>(floats * wire.bytes);
    ++fused_calls;
    min_bytes = min_bytes < 0 ? bytes : std::min(min_bytes, bytes);
    max_bytes = std::max(max_bytes, bytes);
    queue.complete(group);
  }
};

// Stand-in for the backward pass of one layer: work the main thread does while reductions run.
float compute(std::size_t n) {
  float acc = 0;
  for (std::size_t i = 0; i < n; ++i) acc += static_cast<float>(i % 7) * 0.5f;
  return acc;
}

bool parse(int argc, char** argv, Options& o) {
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--expect-engine") { o.expect_engine = true; continue; }
    if (a == "--fp16") { o.fp16 = true; continue; }
    if (i + 1 >= argc) return false;
    char* end = nullptr;
    const char* v = argv[++i];
    if (a == "--steps") o.steps = static_cast<int>(std::strtol(v, &end, 10));
    else if (a == "--threshold") o.threshold = std::strtol(v, &end, 10);
    else if (a == "--cycle-ms") o.cycle_ms = static_cast<int>(std::strtol(v, &end, 10));
    else if (a == "--tolerate") o.tolerate = std::strtod(v, &end);
    else return false;
    if (end == v || *end != '\0') return false;
  }
  return o.steps >= 1 && o.threshold >= 4 && o.cycle_ms >= 0 && o.tolerate >= 0 && o.tolerate <= 1;
}

}  // namespace

int main(int argc, char** argv) {
  int provided = 0;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
  int rank = 0, size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  Options opt;
  if (!parse(argc, argv, opt) || provided < MPI_THREAD_MULTIPLE) {
    if (rank == 0) {
      if (provided < MPI_THREAD_MULTIPLE) std::fprintf(stderr, "horovod_like: MPI does not provide MPI_THREAD_MULTIPLE\n");
      else std::fprintf(stderr, "horovod_like: usage: horovod_like [--steps N] [--threshold BYTES] [--cycle-ms MS] "
                                "[--tolerate FRACTION] [--fp16] [--expect-engine]\n");
    }
    MPI_Finalize();
    return 2;
  }

  // The communicator the background thread owns (Horovod duplicates the world the same way).
  MPI_Comm comm;
  MPI_Comm_dup(MPI_COMM_WORLD, &comm);
  Wire wire;
  if (opt.fp16) {
    // Horovod's MPIContext does exactly this once at start.
    MPI_Type_contiguous(2, MPI_BYTE, &wire.datatype);
    MPI_Type_commit(&wire.datatype);
    MPI_Op_create(&float16_sum, 1, &wire.op);
    wire.bytes = 2;
  }
  Queue queue;
  Communicator worker{comm, queue, opt.threshold, opt.cycle_ms, opt.steps * static_cast<int>(kLayers.size()), wire, {}, {}};
  std::thread background([&worker] { worker.run(); });

  long wrong = 0, checked = 0;
  float sink = 0;
  const auto start = std::chrono::steady_clock::now();
  for (int step = 0; step < opt.steps; ++step) {
    std::vector<std::unique_ptr<Tensor>> tensors;
    for (std::size_t l = kLayers.size(); l-- > 0;) {  // backward: last layer first
      auto t = std::make_unique<Tensor>();
      t->data.resize(static_cast<std::size_t>(kLayers[l]));
      for (std::size_t i = 0; i < t->data.size(); ++i) t->data[i] = value(step, static_cast<int>(l), i, rank);
      queue.push(t.get());
      sink += compute(t->data.size());  // the next layer's backward overlaps this one's reduction
      tensors.push_back(std::move(t));
    }
    for (std::size_t k = 0; k < tensors.size(); ++k) {
      queue.wait(tensors[k].get());
      const int l = static_cast<int>(kLayers.size() - 1 - k);
      const auto& d = tensors[k]->data;
      for (std::size_t i = 0; i < d.size(); ++i) {
        float expected = 0;
        for (int r = 0; r < size; ++r) expected += value(step, l, i, r);
        wrong += std::memcmp(&d[i], &expected, sizeof(float)) != 0;
      }
      checked += static_cast<long>(d.size());
    }
  }
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  background.join();

  // Also from the background thread's communicator, now that the thread is done with it.
  long totals[2] = {wrong, checked};
  MPI_Allreduce(MPI_IN_PLACE, totals, 2, MPI_LONG, MPI_SUM, comm);
  long intercepted = -1;
  using GetStats = int (*)(optireduce_process_stats*);
  if (auto get = reinterpret_cast<GetStats>(dlsym(RTLD_DEFAULT, "optireduce_get_process_stats"))) {
    optireduce_process_stats s{};
    if (get(&s) == 0) intercepted = static_cast<long>(s.intercepted_calls);
  }
  long min_intercepted = intercepted;
  MPI_Allreduce(MPI_IN_PLACE, &min_intercepted, 1, MPI_LONG, MPI_MIN, comm);
  MPI_Comm_free(&comm);
  if (opt.fp16) {
    MPI_Op_free(&wire.op);
    MPI_Type_free(&wire.datatype);
  }

  int status = 0;
  if (rank == 0) {
    const double fraction = static_cast<double>(totals[0]) / static_cast<double>(totals[1]);
    std::printf("horovod_like: %d ranks, %d steps of %zu tensors in %.2f s; %ld fused %s reductions of %ld to %ld bytes "
                "(threshold %ld); %ld of %ld entries wrong (%.3g)",
                size, opt.steps, kLayers.size(), seconds, worker.fused_calls, opt.fp16 ? "fp16" : "float", worker.min_bytes,
                worker.max_bytes,
                opt.threshold, totals[0], totals[1], fraction);
    if (min_intercepted >= 0) std::printf("; OptiReduce intercepted %ld calls on every rank", min_intercepted);
    std::printf("%s\n", sink < 0 ? " " : "");
    if (fraction > opt.tolerate) {
      std::printf("horovod_like: FAILED: %.3g of the entries are wrong (tolerated: %.3g)\n", fraction, opt.tolerate);
      status = 1;
    } else if (opt.expect_engine && min_intercepted <= 0) {
      std::printf("horovod_like: FAILED: --expect-engine, but OptiReduce %s\n",
                  min_intercepted < 0 ? "is not preloaded" : "intercepted no call on some rank");
      status = 1;
    } else {
      std::printf("horovod_like: OK\n");
    }
  }
  MPI_Bcast(&status, 1, MPI_INT, 0, MPI_COMM_WORLD);
  MPI_Finalize();
  return status;
}
