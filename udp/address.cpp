#include "address.hpp"

#include <algorithm>

#include "optireduce/byte_order.hpp"

namespace optireduce::udp {
namespace {

constexpr std::size_t kFixedBytes = 2 + 16 + datagram::HostIdentity::kSize + 1;
constexpr std::size_t kEndpointFixedBytes = 4 + 2 + 1 + 1 + 4 + 4 + 1;

// Reads fields in order and says whether the blob held them.
class Cursor {
 public:
  explicit Cursor(std::span<const std::byte> in) : in_(in) {}
  bool has(std::size_t n) const { return in_.size() - at_ >= n; }
  const std::byte* take(std::size_t n) {
    const std::byte* p = in_.data() + at_;
    at_ += n;
    return p;
  }
  bool done() const { return at_ == in_.size(); }

 private:
  std::span<const std::byte> in_;
  std::size_t at_ = 0;
};

bool decode_endpoint(Cursor& c, Endpoint& e) {
  if (!c.has(kEndpointFixedBytes)) return false;
  ByteReader r(c.take(kEndpointFixedBytes));
  e.ip = r.get<std::uint32_t>();
  e.port = r.get<std::uint16_t>();
  e.prefix = r.get<std::uint8_t>();
  e.loopback = r.get<std::uint8_t>() != 0;
  e.mtu = r.get<std::uint32_t>();
  e.receive_buffer = r.get<std::uint32_t>();
  const std::size_t name_bytes = r.get<std::uint8_t>();
  if (!c.has(name_bytes) || e.prefix > 32 || e.port == 0) return false;
  const auto* name = reinterpret_cast<const char*>(c.take(name_bytes));
  e.name.assign(name, name_bytes);
  return true;
}

}  // namespace

std::vector<std::byte> encode(const Address& address) {
  std::size_t bytes = kFixedBytes;
  for (const auto& e : address.endpoints) bytes += kEndpointFixedBytes + std::min<std::size_t>(e.name.size(), 255);
  std::vector<std::byte> out(bytes);
  ByteWriter w(out.data());
  w.put<std::uint8_t>(Address::kVersion)
      .put<std::uint8_t>(static_cast<std::uint8_t>((address.authenticate ? 1 : 0) | (address.fec_group & 31) << 1));
  std::byte* p = std::copy(address.secret.begin(), address.secret.end(), w.at());
  address.host.encode(p);
  w = ByteWriter(p + datagram::HostIdentity::kSize);
  w.put<std::uint8_t>(static_cast<std::uint8_t>(address.endpoints.size()));
  for (const auto& e : address.endpoints) {
    const std::size_t name_bytes = std::min<std::size_t>(e.name.size(), 255);
    w.put<std::uint32_t>(e.ip).put<std::uint16_t>(e.port).put<std::uint8_t>(e.prefix);
    w.put<std::uint8_t>(e.loopback ? 1 : 0).put<std::uint32_t>(e.mtu).put<std::uint32_t>(e.receive_buffer);
    w.put<std::uint8_t>(static_cast<std::uint8_t>(name_bytes));
    w = ByteWriter(std::copy_n(reinterpret_cast<const std::byte*>(e.name.data()), name_bytes, w.at()));
  }
  return out;
}

Status decode(std::span<const std::byte> blob, Address& out) {
  Cursor c(blob);
  OR_CHECK(c.has(kFixedBytes), invalid, "udp address: " + std::to_string(blob.size()) + " bytes, too short");
  const std::byte* fixed = c.take(kFixedBytes);
  OR_CHECK(std::to_integer<std::uint8_t>(fixed[0]) == Address::kVersion, invalid,
           "udp address: version " + std::to_string(std::to_integer<int>(fixed[0])) + ", this build speaks " +
               std::to_string(Address::kVersion));
  out.authenticate = (std::to_integer<std::uint8_t>(fixed[1]) & 1) != 0;
  out.fec_group = (std::to_integer<unsigned>(fixed[1]) >> 1) & 31;
  std::copy_n(fixed + 2, out.secret.size(), out.secret.begin());
  out.host = datagram::HostIdentity::decode(fixed + 18);
  const std::size_t count = std::to_integer<std::size_t>(fixed[kFixedBytes - 1]);
  OR_CHECK(count <= Address::kMaxEndpoints, invalid, "udp address: " + std::to_string(count) + " endpoints");
  out.endpoints.assign(count, {});
  for (auto& e : out.endpoints) OR_CHECK(decode_endpoint(c, e), invalid, "udp address: a malformed endpoint");
  OR_CHECK(c.done(), invalid, "udp address: trailing bytes");
  return Status::Ok();
}

}  // namespace optireduce::udp
