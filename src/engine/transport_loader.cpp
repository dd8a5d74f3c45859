#include "optireduce/engine/engine/transport_loader.hpp"

#include <dlfcn.h>
#include <unistd.h>

#include <cstring>
#include <map>
#include <mutex>

namespace optireduce {
namespace {

std::mutex g_mutex;
std::map<std::string, const TransportModule*> g_modules;

// Lines from a module go through the library's sink, prefixed like the library's own.
void forward_log(LogLevel level, const char* line) {
  auto* write = log_sink().write.load(std::memory_order_acquire);
  if (write) write(level, line);
  else std::fprintf(stderr, "optireduce: %s\n", line);
}

std::string module_file(const std::string& name) { return "liboptireduce-transport-" + name + ".so"; }

}  // namespace

std::string transport_module_dir() {
  // Beside the library (or the program the engine is linked into), then ../lib of it (tools in
  // bin/), then where this build put them and where it installs them.
  std::vector<std::string> dirs;
  Dl_info info{};
  if (dladdr(reinterpret_cast<void*>(&transport_module_dir), &info) != 0 && info.dli_fname &&
      std::strchr(info.dli_fname, '/')) {
    dirs.emplace_back(info.dli_fname);
  } else {
    char self[4096];
    const ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    if (n > 0) dirs.emplace_back(std::string(self, static_cast<std::size_t>(n)));
  }
  if (!dirs.empty()) {
    dirs[0] = dirs[0].substr(0, dirs[0].rfind('/'));
    dirs.push_back(dirs[0].substr(0, dirs[0].rfind('/')) + "/lib");
  }
  dirs.emplace_back(OPTIREDUCE_BUILD_LIBDIR);
  dirs.emplace_back(OPTIREDUCE_INSTALL_LIBDIR);
  for (const auto& dir : dirs)
    if (access((dir + "/" + module_file("ucx")).c_str(), R_OK) == 0) return dir;
  return dirs.front();
}

const TransportModule* load_transport_module(const std::string& name, Status& status) {
  std::lock_guard lock(g_mutex);
  if (auto it = g_modules.find(name); it != g_modules.end()) return it->second;
  const std::string path = transport_module_dir() + "/" + module_file(name);
  // RTLD_LOCAL: UCX's and libfabric's symbols stay out of the job's namespace.
  void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!handle) {
    status = Unavailable("cannot load the " + name + " transport: " + dlerror());
    return nullptr;
  }
  auto entry = reinterpret_cast<optireduce_transport_module_fn>(dlsym(handle, kTransportModuleSymbol));
  const TransportModule* module = entry ? entry() : nullptr;
  if (!module || module->abi_version != kTransportAbiVersion || !module->create) {
    status = Unavailable(path + " is not a transport module of this library version");
    dlclose(handle);
    return nullptr;
  }
  TransportHost host;
  host.log_level = log_sink().level.load();
  host.write_log = &forward_log;
  if (module->attach) module->attach(host);
  g_modules[name] = module;
  return module;
}

std::unique_ptr<Transport> create_transport(const std::string& name, const TransportSettings& settings, Status& status) {
  const TransportModule* module = load_transport_module(name, status);
  if (!module) return nullptr;
  return module->create(settings, status);
}

std::vector<std::string> installed_transport_modules() {
  std::vector<std::string> out;
  const std::string dir = transport_module_dir();
  for (const char* name : {"ucx", "udp", "ofi"})
    if (access((dir + "/" + module_file(name)).c_str(), R_OK) == 0) out.emplace_back(name);
  return out;
}

}  // namespace optireduce
