#include "ofi_address.hpp"

#include <algorithm>

namespace optireduce::ofi {
namespace {

constexpr std::size_t kFixedBytes = 2 + 16 + datagram::HostIdentity::kSize + 1;

void put_endpoint(std::vector<std::byte>& out, bool loopback, const std::vector<std::byte>& name) {
  out.push_back(std::byte{static_cast<unsigned char>(loopback ? 1 : 0)});
  out.push_back(std::byte{static_cast<unsigned char>(name.size())});
  out.insert(out.end(), name.begin(), name.end());
}

}  // namespace

std::vector<std::byte> encode(const OfiAddress& address) {
  std::vector<std::byte> out(kFixedBytes);
  out[0] = std::byte{OfiAddress::kVersion};
  out[1] = std::byte{static_cast<unsigned char>(address.authenticate ? 1 : 0)};
  std::copy(address.secret.begin(), address.secret.end(), out.begin() + 2);
  address.host.encode(out.data() + 18);
  out[kFixedBytes - 1] = std::byte{static_cast<unsigned char>(!address.loopback.empty() + !address.outward.empty())};
  if (!address.loopback.empty()) put_endpoint(out, true, address.loopback);
  if (!address.outward.empty()) put_endpoint(out, false, address.outward);
  return out;
}

Status decode(std::span<const std::byte> blob, OfiAddress& out) {
  OR_CHECK(blob.size() >= kFixedBytes, invalid, "ofi address: " + std::to_string(blob.size()) + " bytes, too short");
  OR_CHECK(std::to_integer<std::uint8_t>(blob[0]) == OfiAddress::kVersion, invalid,
           "ofi address: version " + std::to_string(std::to_integer<int>(blob[0])) + ", this build speaks " +
               std::to_string(OfiAddress::kVersion));
  out.authenticate = (std::to_integer<std::uint8_t>(blob[1]) & 1) != 0;
  std::copy_n(blob.begin() + 2, out.secret.size(), out.secret.begin());
  out.host = datagram::HostIdentity::decode(blob.data() + 18);
  const std::size_t count = std::to_integer<std::size_t>(blob[kFixedBytes - 1]);
  std::size_t at = kFixedBytes;
  out.loopback.clear();
  out.outward.clear();
  for (std::size_t i = 0; i < count; ++i) {
    OR_CHECK(blob.size() - at >= 2, invalid, "ofi address: a truncated endpoint");
    const bool loopback = blob[at] != std::byte{0};
    const std::size_t length = std::to_integer<std::size_t>(blob[at + 1]);
    at += 2;
    OR_CHECK(blob.size() - at >= length && length > 0, invalid, "ofi address: a truncated endpoint");
    (loopback ? out.loopback : out.outward).assign(blob.begin() + static_cast<std::ptrdiff_t>(at),
                                                   blob.begin() + static_cast<std::ptrdiff_t>(at + length));
    at += length;
  }
  OR_CHECK(at == blob.size(), invalid, "ofi address: trailing bytes");
  return Status::Ok();
}

}  // namespace optireduce::ofi
