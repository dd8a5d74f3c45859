#include "optireduce/engine/hierarchy/host_segment.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <thread>

namespace optireduce {
namespace {

constexpr std::size_t kLine = 64;
constexpr std::uint64_t kMagic = 0x4f5048494552ull;  // "OPHIER"

struct Header {
  std::uint64_t magic;
  std::uint32_t local_ranks;
  std::uint64_t slot_bytes;
  std::atomic<std::uint32_t> ready;     // set last by the creator
  std::atomic<std::uint32_t> attached;  // ranks holding a mapping
};
static_assert(sizeof(Header) <= kLine);

struct Control {
  std::atomic<std::uint64_t> counters[6];
  char pad[kLine - 6 * sizeof(std::atomic<std::uint64_t>)];
};
static_assert(sizeof(Control) == kLine);

struct Verdicts {
  std::atomic<std::uint64_t> words[2][2];  // [stage][call % 2]
  char pad[kLine - 4 * sizeof(std::atomic<std::uint64_t>)];
};
static_assert(sizeof(Verdicts) == kLine);

std::size_t round_up(std::size_t n) { return (n + kLine - 1) / kLine * kLine; }
std::size_t total_bytes(int local_ranks, std::size_t slot_bytes) {
  return 2 * kLine + kLine * static_cast<std::size_t>(local_ranks) + round_up(slot_bytes) * (static_cast<std::size_t>(local_ranks) + 1);
}

std::uint32_t host_hash(const std::string& host) {  // FNV-1a
  std::uint32_t h = 2166136261u;
  for (unsigned char c : host) h = (h ^ c) * 16777619u;
  return h;
}

std::string errno_text(const char* what, const std::string& name) { return std::string(what) + " " + name + ": " + std::strerror(errno); }

}  // namespace

std::string HostSegment::name_of(std::uint64_t comm_id, const std::string& host) {
  char name[64];
  std::snprintf(name, sizeof name, "/optireduce-%016llx-%08x", static_cast<unsigned long long>(comm_id), host_hash(host));
  return name;
}

std::unique_ptr<HostSegment> HostSegment::attach(std::uint64_t comm_id, const std::string& host, int local_index,
                                                 int local_ranks, std::size_t slot_bytes, Clock::time_point deadline,
                                                 Status& status) {
  const std::string name = name_of(comm_id, host);
  const std::size_t bytes = total_bytes(local_ranks, slot_bytes);
  const bool creator = local_index == 0;
  int fd = -1;
  if (creator) {
    fd = shm_open(name.c_str(), O_RDWR | O_CREAT | O_EXCL, 0600);
    if (fd < 0) {
      status = IoError(errno_text("cannot create the host's shared memory", name));
      return nullptr;
    }
    if (ftruncate(fd, static_cast<off_t>(bytes)) != 0) {
      status = IoError(errno_text("cannot size the host's shared memory", name));
      close(fd);
      shm_unlink(name.c_str());
      return nullptr;
    }
  } else {
    // The creator may not have made it yet, or not sized it: wait for both, within the deadline.
    for (;;) {
      if (fd < 0) fd = shm_open(name.c_str(), O_RDWR, 0600);
      struct stat st{};
      if (fd >= 0 && fstat(fd, &st) == 0 && static_cast<std::size_t>(st.st_size) == bytes) break;
      if (Clock::now() >= deadline) {
        if (fd >= 0) close(fd);
        status = Timeout("the host's shared memory " + name + " was not created by its first rank in time");
        return nullptr;
      }
      std::this_thread::sleep_for(std::chrono::microseconds(200));
    }
  }
  void* base = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  close(fd);
  if (base == MAP_FAILED) {
    status = IoError(errno_text("cannot map the host's shared memory", name));
    if (creator) shm_unlink(name.c_str());
    return nullptr;
  }
  auto* header = static_cast<Header*>(base);
  if (creator) {
    header->magic = kMagic;
    header->local_ranks = static_cast<std::uint32_t>(local_ranks);
    header->slot_bytes = slot_bytes;
    header->attached.store(0, std::memory_order_relaxed);
    header->ready.store(1, std::memory_order_release);
  } else {
    while (header->ready.load(std::memory_order_acquire) != 1) {
      if (Clock::now() >= deadline) {
        munmap(base, bytes);
        status = Timeout("the host's shared memory " + name + " was not made ready by its first rank in time");
        return nullptr;
      }
      std::this_thread::yield();
    }
    if (header->magic != kMagic || header->local_ranks != static_cast<std::uint32_t>(local_ranks) ||
        header->slot_bytes != slot_bytes) {
      munmap(base, bytes);
      status = PeerError("the host's shared memory " + name + " was made for another shape");
      return nullptr;
    }
  }
  // The last rank to attach removes the name: from then on only the mappings hold the memory.
  if (header->attached.fetch_add(1, std::memory_order_acq_rel) + 1 == static_cast<std::uint32_t>(local_ranks))
    shm_unlink(name.c_str());
  return std::unique_ptr<HostSegment>(new HostSegment(static_cast<std::byte*>(base), bytes, local_ranks, slot_bytes,
                                                          creator ? name : std::string()));
}

HostSegment::~HostSegment() {
  munmap(base_, bytes_);
  if (!unlink_at_end_.empty()) shm_unlink(unlink_at_end_.c_str());  // ENOENT once the last rank attached
}

std::byte* HostSegment::slot(int local_index) const {
  return base_ + 2 * kLine + kLine * static_cast<std::size_t>(local_ranks_) + round_up(slot_bytes_) * static_cast<std::size_t>(local_index);
}

std::byte* HostSegment::result() const { return slot(local_ranks_); }

std::atomic<std::uint64_t>& HostSegment::counter(int local_index, int which) const {
  return reinterpret_cast<Control*>(base_ + 2 * kLine)[local_index].counters[which];
}

std::atomic<std::uint64_t>& HostSegment::verdict(int stage, std::uint64_t call) const {
  return reinterpret_cast<Verdicts*>(base_ + kLine)->words[stage][call % 2];
}

}  // namespace optireduce
