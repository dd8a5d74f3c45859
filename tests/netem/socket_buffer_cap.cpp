// Preloaded into a test's processes, this makes them see socket buffer limits as an unprivileged
// user does on a host whose net.core.rmem_max / wmem_max are EMULATED_RMEM_MAX / EMULATED_WMEM_MAX
// bytes (the kernel's default is 212992): SO_RCVBUFFORCE and SO_SNDBUFFORCE fail with EPERM (no
// CAP_NET_ADMIN), and SO_RCVBUF / SO_SNDBUF requests are capped at the limit before the kernel
// doubles them, exactly as the kernel caps them. Everything else goes to the real setsockopt.
//
// Why not the sysctl itself: on this kernel a child network namespace's net.core.rmem_max is
// read-only (it mirrors the host's), and the host's value is shared with everyone on the machine.
#include <dlfcn.h>
#include <sys/socket.h>

#include <cerrno>
#include <climits>
#include <cstdlib>
#include <cstring>

namespace {

using SetSockOpt = int (*)(int, int, int, const void*, socklen_t);

long limit(const char* name) {
  const char* v = std::getenv(name);
  if (!v || !*v) return -1;
  const long n = std::strtol(v, nullptr, 10);
  return n > 0 ? n : -1;
}

}  // namespace

extern "C" __attribute__((visibility("default"))) int setsockopt(int fd, int level, int option, const void* value,
                                                                  socklen_t length) {
  static const auto real = reinterpret_cast<SetSockOpt>(dlsym(RTLD_NEXT, "setsockopt"));
  if (level == SOL_SOCKET) {
    const long rmem = limit("EMULATED_RMEM_MAX"), wmem = limit("EMULATED_WMEM_MAX");
    const bool force = option == SO_RCVBUFFORCE || option == SO_SNDBUFFORCE;
    const long cap = (option == SO_RCVBUF || option == SO_RCVBUFFORCE) ? rmem
                     : (option == SO_SNDBUF || option == SO_SNDBUFFORCE) ? wmem : -1;
    if (cap > 0 && force) {
      errno = EPERM;
      return -1;
    }
    if (cap > 0 && value && length >= sizeof(int)) {
      int wanted = 0;
      std::memcpy(&wanted, value, sizeof wanted);
      const int capped = wanted > cap ? static_cast<int>(cap) : wanted;
      return real(fd, level, option, &capped, sizeof capped);
    }
  }
  return real(fd, level, option, value, length);
}
