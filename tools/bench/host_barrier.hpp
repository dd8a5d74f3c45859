// A barrier in the shared memory of one host, for the benchmark's start of each iteration: it
// releases the ranks without sending anything over the network being measured. Over a lossy
// network an MPI barrier's own messages are lost and retransmitted too, so ranks leave it up to a
// retransmission timeout apart and every contender's figure carries the harness's tail; this one
// keeps the start of an iteration out of what is measured. All ranks must share the host (network
// namespaces of one machine do).
#pragma once

#include <fcntl.h>
#include <linux/futex.h>
#include <mpi.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <stdexcept>
#include <string>

namespace optireduce::tools {

class HostBarrier {
 public:
  // Collective over `comm`. Throws std::runtime_error (with the reason) where the ranks do not
  // share a host or the shared memory cannot be set up; every rank throws alike.
  explicit HostBarrier(MPI_Comm comm) : comm_(comm) {
    MPI_Comm_size(comm_, &ranks_);
    int rank = 0;
    MPI_Comm_rank(comm_, &rank);
    MPI_Comm host;
    PMPI_Comm_split_type(comm_, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &host);
    int on_host = 0;
    MPI_Comm_size(host, &on_host);
    MPI_Comm_free(&host);
    int fewest = on_host;
    PMPI_Allreduce(MPI_IN_PLACE, &fewest, 1, MPI_INT, MPI_MIN, comm_);
    if (fewest != ranks_)
      throw std::runtime_error("--barrier host needs every rank on one host (the MPI sees " + std::to_string(fewest) +
                               " of " + std::to_string(ranks_) + " on some host); use --barrier mpi");
    char name[64] = {};
    if (rank == 0)
      std::snprintf(name, sizeof name, "/optireduce-bench-%ld-%lld", static_cast<long>(getpid()),
                    static_cast<long long>(std::chrono::steady_clock::now().time_since_epoch().count()));
    PMPI_Bcast(name, sizeof name, MPI_CHAR, 0, comm_);
    int fd = rank == 0 ? shm_open(name, O_CREAT | O_EXCL | O_RDWR, 0600) : -1;
    const bool created = fd >= 0;
    int ok = created && ftruncate(fd, sizeof(Shared)) == 0;
    PMPI_Bcast(&ok, 1, MPI_INT, 0, comm_);
    if (rank != 0 && ok) fd = shm_open(name, O_RDWR, 0600);
    void* p = fd >= 0 ? mmap(nullptr, sizeof(Shared), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0) : MAP_FAILED;
    const int err = p == MAP_FAILED ? errno : 0;
    if (fd >= 0) close(fd);
    int mapped = p != MAP_FAILED;
    PMPI_Allreduce(MPI_IN_PLACE, &mapped, 1, MPI_INT, MPI_MIN, comm_);
    if (created) shm_unlink(name);  // every rank has it mapped (or failed): the name can go
    if (!mapped) {
      if (p != MAP_FAILED) munmap(p, sizeof(Shared));
      throw std::runtime_error(std::string("--barrier host: cannot share memory through /dev/shm") +
                               (err ? std::string(": ") + std::strerror(err) : std::string()));
    }
    shared_ = static_cast<Shared*>(p);  // zero-filled by ftruncate
  }
  HostBarrier(const HostBarrier&) = delete;
  HostBarrier& operator=(const HostBarrier&) = delete;
  ~HostBarrier() { munmap(shared_, sizeof(Shared)); }

  // Returns once every rank has arrived; throws after `limit` (a rank died or hangs: the job
  // would otherwise wait for ever).
  void arrive(std::chrono::seconds limit = std::chrono::seconds(600)) {
    const std::uint32_t generation = shared_->generation.load();
    if (shared_->arrived.fetch_add(1) + 1 == static_cast<std::uint32_t>(ranks_)) {
      shared_->arrived.store(0);
      shared_->generation.fetch_add(1);
      syscall(SYS_futex, &shared_->generation, FUTEX_WAKE, INT32_MAX, nullptr, nullptr, 0);
      return;
    }
    const auto give_up = std::chrono::steady_clock::now() + limit;
    while (shared_->generation.load() == generation) {
      if (std::chrono::steady_clock::now() >= give_up)
        throw std::runtime_error("--barrier host: the other ranks did not arrive within " +
                                 std::to_string(limit.count()) + " s");
      const timespec second{1, 0};
      syscall(SYS_futex, &shared_->generation, FUTEX_WAIT, generation, &second, nullptr, 0);
    }
  }

 private:
  struct Shared {
    std::atomic<std::uint32_t> arrived;
    std::atomic<std::uint32_t> generation;
  };
  static_assert(std::atomic<std::uint32_t>::is_always_lock_free && sizeof(std::atomic<std::uint32_t>) == 4);

  MPI_Comm comm_;
  int ranks_ = 1;
  Shared* shared_ = nullptr;
};

}  // namespace optireduce::tools
