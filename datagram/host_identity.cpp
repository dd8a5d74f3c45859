#include "host_identity.hpp"

#include <sys/stat.h>

#include <algorithm>
#include <cctype>
#include <fstream>
#include <string>

#include "optireduce/byte_order.hpp"

namespace optireduce::datagram {
namespace {

int hex_digit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
}

// "3f1e...-....": 32 hex digits with dashes.
bool parse_uuid(const std::string& text, std::array<std::byte, 16>& out) {
  std::size_t n = 0;
  for (std::size_t i = 0; i < text.size() && n < 32; ++i) {
    if (text[i] == '-') continue;
    const int d = hex_digit(text[i]);
    if (d < 0) return false;
    out[n / 2] = static_cast<std::byte>((n % 2) ? (std::to_integer<int>(out[n / 2]) | d) : (d << 4));
    ++n;
  }
  return n == 32;
}

}  // namespace

void HostIdentity::encode(std::byte* out) const {
  std::copy(boot_id.begin(), boot_id.end(), out);
  put_le<std::uint64_t>(out + 16, known ? netns_inode : 0);
}

HostIdentity HostIdentity::decode(const std::byte* in) {
  HostIdentity id;
  std::copy_n(in, 16, id.boot_id.begin());
  id.netns_inode = get_le<std::uint64_t>(in + 16);
  id.known = id.netns_inode != 0;
  return id;
}

HostIdentity this_host() {
  HostIdentity id;
  std::string boot;
  std::ifstream("/proc/sys/kernel/random/boot_id") >> boot;
  struct stat st {};
  if (!parse_uuid(boot, id.boot_id) || ::stat("/proc/self/ns/net", &st) != 0 || st.st_ino == 0) return HostIdentity{};
  id.netns_inode = st.st_ino;
  id.known = true;
  return id;
}

}  // namespace optireduce::datagram
