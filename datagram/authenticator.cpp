#include "authenticator.hpp"

#include "ghash.hpp"
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <sys/random.h>

#include <algorithm>
#include <string>

#include "optireduce/byte_order.hpp"

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

bool add_data(EVP_CIPHER_CTX* ctx, std::span<const std::byte> data) {
  if (data.empty()) return true;
  int out = 0;
  return EVP_EncryptUpdate(ctx, nullptr, &out, reinterpret_cast<const unsigned char*>(data.data()), static_cast<int>(data.size())) == 1;
}

}  // namespace

struct Authenticator::Context {
  EVP_CIPHER_CTX* ctx = nullptr;  // AES-128-GCM: the tag as OpenSSL computes it
  // The same tag with the wide GHASH (ghash.hpp) where the CPU has it: AES-128 for the mask.
  EVP_CIPHER_CTX* block = nullptr;
  std::unique_ptr<Ghash> ghash;
  ~Context() {
    EVP_CIPHER_CTX_free(ctx);
    EVP_CIPHER_CTX_free(block);
  }
};

Status draw_secret(Secret& out) {
  OR_CHECK(getrandom(out.data(), out.size(), 0) == static_cast<ssize_t>(out.size()), unavailable,
           "no randomness for the job secret (getrandom)");
  return Status::Ok();
}

std::unique_ptr<Authenticator> Authenticator::create(const Secret& secret, int self, int ranks, Status& status) {
  std::unique_ptr<Authenticator> auth(new Authenticator());
  const bool wide = Ghash::available();
  auto keyed = [&](int destination) -> std::unique_ptr<Context> {
    std::array<unsigned char, 16> key;
    auto c = std::make_unique<Context>();
    c->ctx = EVP_CIPHER_CTX_new();
    bool ok = c->ctx && derive_key(secret, destination, key) &&
              EVP_EncryptInit_ex(c->ctx, EVP_aes_128_gcm(), nullptr, key.data(), nullptr) == 1;
    if (ok && wide) auth->add_wide_ghash(*c, key);
    OPENSSL_cleanse(key.data(), key.size());
    return ok ? std::move(c) : nullptr;
  };
  auth->seal_.resize(static_cast<std::size_t>(ranks));
  for (int d = 0; d < ranks; ++d) {
    if (d == self) continue;
    if (!(auth->seal_[static_cast<std::size_t>(d)] = keyed(d))) {
      status = Unavailable("OpenSSL: cannot key AES-128-GCM for rank " + std::to_string(d));
      return nullptr;
    }
  }
  if (!(auth->verify_ = keyed(self))) {
    status = Unavailable("OpenSSL: cannot key AES-128-GCM");
    return nullptr;
  }
  status = Status::Ok();
  return auth;
}

Authenticator::~Authenticator() = default;

void Authenticator::add_wide_ghash(Context& c, const std::array<unsigned char, 16>& key) {
  // H = AES_K(0^128), GCM's hash key.
  std::array<unsigned char, 16> zero{}, h{};
  int out = 0;
  c.block = EVP_CIPHER_CTX_new();
  if (!c.block || EVP_EncryptInit_ex(c.block, EVP_aes_128_ecb(), nullptr, key.data(), nullptr) != 1 ||
      EVP_CIPHER_CTX_set_padding(c.block, 0) != 1 || EVP_EncryptUpdate(c.block, h.data(), &out, zero.data(), 16) != 1 ||
      out != 16) {
    EVP_CIPHER_CTX_free(c.block);
    c.block = nullptr;
    return;
  }
  c.ghash = std::make_unique<Ghash>(std::span<const std::uint8_t, 16>(h.data(), 16));
  OPENSSL_cleanse(h.data(), h.size());
  // Used only once it gives OpenSSL's tag: a datagram-sized message in uneven pieces.
  std::array<std::byte, Header::kSize> head{};
  std::vector<std::byte> header(37), payload(65507 - 37);
  std::uint32_t x = 0x9e3779b9u;
  for (auto* v : {&header, &payload})
    for (auto& b : *v) b = static_cast<std::byte>((x = x * 1664525u + 1013904223u) >> 24);
  for (std::size_t i = 0; i < head.size(); ++i) head[i] = static_cast<std::byte>(i * 7 + 1);
  std::array<std::byte, Header::kTagSize> wide_tag, reference;
  compute(c, head, header, payload, wide_tag);
  std::unique_ptr<Ghash> keep = std::move(c.ghash);
  compute(c, head, header, payload, reference);
  if (wide_tag == reference && std::any_of(reference.begin(), reference.end(), [](std::byte b) { return b != std::byte{0}; }))
    c.ghash = std::move(keep);
}

bool Authenticator::wide_ghash() const { return verify_ && verify_->ghash; }

void Authenticator::compute(Context& context, std::span<const std::byte, Header::kSize> head,
                            std::span<const std::byte> header, std::span<const std::byte> payload,
                            std::span<std::byte, Header::kTagSize> tag) {
  std::array<unsigned char, kNonceBytes> nonce;
  std::copy_n(reinterpret_cast<const unsigned char*>(head.data() + kSourceOffset), 4, nonce.data());
  std::copy_n(reinterpret_cast<const unsigned char*>(head.data() + kSequenceOffset), 8, nonce.data() + 4);
  if (context.ghash) {
    // GMAC = AES_K(J0) xor GHASH_H(everything), J0 = nonce || 0^31 || 1.
    Ghash& g = *context.ghash;
    g.begin();
    g.update(head.first<Header::kTagOffset>());
    g.update(header);
    g.update(payload);
    std::array<std::uint8_t, 16> s;
    g.finish(s);
    std::array<unsigned char, 16> j0{}, mask{};
    std::copy(nonce.begin(), nonce.end(), j0.begin());
    j0[15] = 1;
    int out = 0;
    const bool ok = EVP_EncryptUpdate(context.block, mask.data(), &out, j0.data(), 16) == 1 && out == 16;
    for (std::size_t i = 0; i < Header::kTagSize; ++i) tag[i] = ok ? static_cast<std::byte>(mask[i] ^ s[i]) : std::byte{0};
    return;
  }
  unsigned char none[16];
  int out = 0;
  EVP_CIPHER_CTX* ctx = context.ctx;
  const bool ok = EVP_EncryptInit_ex(ctx, nullptr, nullptr, nullptr, nonce.data()) == 1 &&
                  add_data(ctx, head.first<Header::kTagOffset>()) && add_data(ctx, header) && add_data(ctx, payload) &&
                  EVP_EncryptFinal_ex(ctx, none, &out) == 1 &&
                  EVP_CIPHER_CTX_ctrl(ctx, EVP_CTRL_GCM_GET_TAG, static_cast<int>(Header::kTagSize), tag.data()) == 1;
  // A failed computation leaves a zero tag, which no verification accepts by accident.
  if (!ok) std::fill(tag.begin(), tag.end(), std::byte{0});
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
