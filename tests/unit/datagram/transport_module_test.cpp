// The udp and ofi modules load as the library loads them: dlopen, the one exported symbol, the
// ABI version, a transport created through it, and what it reports about this host.
#include <dlfcn.h>
#include <gtest/gtest.h>

#include "optireduce/transport_module.hpp"

namespace optireduce::testing {
namespace {

struct Loaded {
  void* handle = nullptr;
  const TransportModule* module = nullptr;
  ~Loaded() {
    if (handle) dlclose(handle);
  }
};

void load(const char* path, Loaded& out) {
  out.handle = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  ASSERT_NE(out.handle, nullptr) << dlerror();
  auto entry = reinterpret_cast<optireduce_transport_module_fn>(dlsym(out.handle, kTransportModuleSymbol));
  ASSERT_NE(entry, nullptr) << dlerror();
  out.module = entry();
  ASSERT_NE(out.module, nullptr);
  EXPECT_EQ(out.module->abi_version, kTransportAbiVersion);
  // Nothing else is exported: the module's own copies of its dependencies stay private.
  // (UdpTransport::start() and OfiTransport::start(), each defined in its own module.)
  EXPECT_EQ(dlsym(out.handle, "_ZN10optireduce3udp12UdpTransport5startEv"), nullptr);
  EXPECT_EQ(dlsym(out.handle, "_ZN10optireduce3ofi12OfiTransport5startEv"), nullptr);
}

class TransportModule : public ::testing::TestWithParam<std::pair<const char*, const char*>> {};

TEST_P(TransportModule, LoadsCreatesAndDescribesTheHost) {
  Loaded m;
  load(GetParam().second, m);
  ASSERT_NE(m.module, nullptr);
  EXPECT_STREQ(m.module->name, GetParam().first);
  const TransportHost host{static_cast<int>(LogLevel::error), nullptr};
  m.module->attach(host);
  TransportSettings settings;
  settings.ofi.provider = "udp";
  EXPECT_FALSE(m.module->describe_host(settings).empty());
  Status s;
  auto t = m.module->create(settings, s);
  if (!t && s.code() == StatusCode::unavailable) GTEST_SKIP() << s.text();
  ASSERT_TRUE(t) << s.text();
  EXPECT_FALSE(t->local_address().empty());
}

INSTANTIATE_TEST_SUITE_P(Modules, TransportModule,
                         ::testing::Values(std::make_pair("udp", OPTIREDUCE_UDP_MODULE), std::make_pair("ofi", OPTIREDUCE_OFI_MODULE)),
                         [](const auto& info) { return std::string(info.param.first); });

}  // namespace
}  // namespace optireduce::testing
