#include "authenticator.hpp"

#include <nettle/umac.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <sys/random.h>

#include <algorithm>
#include <string>

#include "optireduce/byte_order.hpp"
#include "umac64.hpp"

namespace optireduce::datagram {
namespace {

constexpr std::size_t kNonceBytes = 12;
constexpr std::size_t kSourceOffset = 8, kSequenceOffset = 16;

// The key of one destination: the secret's AES encryption of a block naming that destination
// (AES as a pseudo-random function, so keys of different destinations are independent).
bool derive_key(const Secret& secret, int destination, std::array<unsigned char, 16>& key) {
  std::array<unsigned char, 16> block{'O', 'R', 'D', 'G', '-', 'k', 'e', 'y'};
  put_le<std::uint32_t>(reinterpret_cast<std::byte*>(block.data() + 8), static_cast<std::uint32_t>(destination));
  EVP_CIPHER_CTX* ctx = EVP_CIPHER_CTX_new();
  int out = 0;
  const bool ok = ctx && EVP_EncryptInit_ex(ctx, EVP_aes_128_ecb(), nullptr, reinterpret_cast<const unsigned char*>(secret.data()), nullptr) == 1 &&
                  EVP_CIPHER_CTX_set_padding(ctx, 0) == 1 &&
                  EVP_EncryptUpdate(ctx, key.data(), &out, block.data(), static_cast<int>(block.size())) == 1 &&
                  out == static_cast<int>(key.size());
  EVP_CIPHER_CTX_free(ctx);
  OPENSSL_cleanse(block.data(), block.size());
  return ok;
}

void nettle_update(umac64_ctx& ctx, std::span<const std::byte> data) {
  if (!data.empty()) umac64_update(&ctx, data.size(), reinterpret_cast<const std::uint8_t*>(data.data()));
}

}  // namespace

struct Authenticator::Context {
  umac64_ctx reference{};        // nettle's UMAC-64 under this key
  std::unique_ptr<Umac64> wide;  // the same tag with the wide NH, where it matched nettle's
  ~Context() { OPENSSL_cleanse(&reference, sizeof reference); }
};

Status draw_secret(Secret& out) {
  OR_CHECK(getrandom(out.data(), out.size(), 0) == static_cast<ssize_t>(out.size()), unavailable,
           "no randomness for the job secret (getrandom)");
  return Status::Ok();
}

std::unique_ptr<Authenticator> Authenticator::create(const Secret& secret, int self, int ranks, Status& status) {
  std::unique_ptr<Authenticator> auth(new Authenticator());
  auto keyed = [&](int destination) -> std::unique_ptr<Context> {
    std::array<unsigned char, 16> key;
    if (!derive_key(secret, destination, key)) return nullptr;
    auto c = std::make_unique<Context>();
    umac64_set_key(&c->reference, key.data());
    if (Umac64::available()) add_wide_umac(*c, key);
    OPENSSL_cleanse(key.data(), key.size());
    return c;
  };
  auth->seal_.resize(static_cast<std::size_t>(ranks));
  for (int d = 0; d < ranks; ++d) {
    if (d == self) continue;
    if (!(auth->seal_[static_cast<std::size_t>(d)] = keyed(d))) {
      status = Unavailable("OpenSSL: cannot derive the datagram key for rank " + std::to_string(d));
      return nullptr;
    }
  }
  if (!(auth->verify_ = keyed(self))) {
    status = Unavailable("OpenSSL: cannot derive the datagram key");
    return nullptr;
  }
  status = Status::Ok();
  return auth;
}

Authenticator::~Authenticator() = default;

void Authenticator::add_wide_umac(Context& c, const std::array<unsigned char, 16>& key) {
  c.wide = Umac64::create(std::span<const std::uint8_t, 16>(key.data(), 16));
  if (!c.wide) return;
  // Used only once it gives nettle's tag: a datagram-sized message in uneven pieces.
  std::array<std::byte, Header::kSize> head{};
  std::vector<std::byte> header(37), payload(65507 - 37);
  std::uint32_t x = 0x9e3779b9u;
  for (auto* v : {&header, &payload})
    for (auto& b : *v) b = static_cast<std::byte>((x = x * 1664525u + 1013904223u) >> 24);
  for (std::size_t i = 0; i < head.size(); ++i) head[i] = static_cast<std::byte>(i * 7 + 1);
  std::array<std::byte, Header::kTagSize> wide_tag, reference;
  compute(c, head, header, payload, wide_tag);
  std::unique_ptr<Umac64> keep = std::move(c.wide);
  compute(c, head, header, payload, reference);
  if (wide_tag == reference && std::any_of(reference.begin(), reference.end(), [](std::byte b) { return b != std::byte{0}; }))
    c.wide = std::move(keep);
}

bool Authenticator::wide_nh() const { return verify_ && verify_->wide; }

void Authenticator::compute(Context& context, std::span<const std::byte, Header::kSize> head,
                            std::span<const std::byte> header, std::span<const std::byte> payload,
                            std::span<std::byte, Header::kTagSize> tag) {
  std::array<std::uint8_t, kNonceBytes> nonce;
  std::copy_n(reinterpret_cast<const std::uint8_t*>(head.data() + kSourceOffset), 4, nonce.data());
  std::copy_n(reinterpret_cast<const std::uint8_t*>(head.data() + kSequenceOffset), 8, nonce.data() + 4);
  auto* out = reinterpret_cast<std::uint8_t*>(tag.data());
  if (context.wide) {
    Umac64& u = *context.wide;
    u.begin();
    u.update(head.first<Header::kTagOffset>());
    u.update(header);
    u.update(payload);
    // A failure leaves a zero tag, which no verification accepts by accident.
    u.finish(nonce, std::span<std::uint8_t, Header::kTagSize>(out, Header::kTagSize));
    return;
  }
  umac64_ctx& c = context.reference;
  umac64_set_nonce(&c, nonce.size(), nonce.data());
  nettle_update(c, head.first<Header::kTagOffset>());
  nettle_update(c, header);
  nettle_update(c, payload);
  umac64_digest(&c, Header::kTagSize, out);
}
void Authenticator::seal(int destination, std::span<std::byte, Header::kSize> head, std::span<const std::byte> header,
                         std::span<const std::byte> payload) {
  auto tag = head.subspan<Header::kTagOffset, Header::kTagSize>();
  Context* c = destination >= 0 && static_cast<std::size_t>(destination) < seal_.size()
                   ? seal_[static_cast<std::size_t>(destination)].get() : nullptr;
  if (!c) {
    std::fill(tag.begin(), tag.end(), std::byte{0});
    return;
  }
  compute(*c, head, header, payload, tag);
}

bool Authenticator::verify(std::span<const std::byte, Header::kSize> head, std::span<const std::byte> header,
                           std::span<const std::byte> payload) {
  std::array<std::byte, Header::kTagSize> expected;
  compute(*verify_, head, header, payload, expected);
  const auto got = head.subspan<Header::kTagOffset, Header::kTagSize>();
  const bool zero = std::all_of(expected.begin(), expected.end(), [](std::byte b) { return b == std::byte{0}; });
  return !zero && CRYPTO_memcmp(expected.data(), got.data(), Header::kTagSize) == 0;
}

}  // namespace optireduce::datagram
