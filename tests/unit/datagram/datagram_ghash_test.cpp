// The wide GHASH (datagram/ghash.hpp) gives GMAC's tag as OpenSSL computes it, for every length
// and every way the data is split into pieces; the authenticator uses it on this CPU.
#include <gtest/gtest.h>
#include <openssl/evp.h>

#include <array>
#include <cstring>
#include <random>
#include <vector>

#include "optireduce/datagram/authenticator.hpp"
#include "optireduce/datagram/ghash.hpp"

namespace optireduce::datagram {
namespace {

using Block = std::array<unsigned char, 16>;

Block aes(const Block& key, const Block& in) {
  Block out{};
  int n = 0;
  EVP_CIPHER_CTX* c = EVP_CIPHER_CTX_new();
  EXPECT_EQ(EVP_EncryptInit_ex(c, EVP_aes_128_ecb(), nullptr, key.data(), nullptr), 1);
  EVP_CIPHER_CTX_set_padding(c, 0);
  EXPECT_EQ(EVP_EncryptUpdate(c, out.data(), &n, in.data(), 16), 1);
  EVP_CIPHER_CTX_free(c);
  return out;
}

Block openssl_gmac(const Block& key, const std::array<unsigned char, 12>& nonce, const std::vector<std::byte>& data) {
  Block tag{};
  unsigned char none[16];
  int n = 0;
  EVP_CIPHER_CTX* c = EVP_CIPHER_CTX_new();
  EXPECT_EQ(EVP_EncryptInit_ex(c, EVP_aes_128_gcm(), nullptr, key.data(), nonce.data()), 1);
  if (!data.empty()) {
    EXPECT_EQ(EVP_EncryptUpdate(c, nullptr, &n, reinterpret_cast<const unsigned char*>(data.data()), static_cast<int>(data.size())), 1);
  }
  EXPECT_EQ(EVP_EncryptFinal_ex(c, none, &n), 1);
  EXPECT_EQ(EVP_CIPHER_CTX_ctrl(c, EVP_CTRL_GCM_GET_TAG, 16, tag.data()), 1);
  EVP_CIPHER_CTX_free(c);
  return tag;
}

Block wide_gmac(Ghash& g, const Block& key, const std::array<unsigned char, 12>& nonce, const std::vector<std::byte>& data,
                std::size_t cut1, std::size_t cut2) {
  g.begin();
  g.update(std::span(data).first(cut1));
  g.update(std::span(data).subspan(cut1, cut2 - cut1));
  g.update(std::span(data).subspan(cut2));
  std::array<std::uint8_t, 16> s;
  g.finish(s);
  Block j0{};
  std::copy(nonce.begin(), nonce.end(), j0.begin());
  j0[15] = 1;
  const Block mask = aes(key, j0);
  Block tag;
  for (int i = 0; i < 16; ++i) tag[i] = mask[i] ^ s[i];
  return tag;
}

TEST(Ghash, GivesOpenSslsGmacForEveryLengthAndSplit) {
  if (!Ghash::available()) GTEST_SKIP() << "this CPU has no VPCLMULQDQ with AVX-512: the tag is OpenSSL's alone";
  std::mt19937 rng(7);
  auto byte = [&] { return static_cast<unsigned char>(rng()); };
  for (int k = 0; k < 4; ++k) {
    Block key;
    for (auto& b : key) b = byte();
    Ghash g(std::span<const std::uint8_t, 16>(aes(key, Block{}).data(), 16));
    std::vector<std::size_t> lengths;
    for (std::size_t n = 0; n <= 700; ++n) lengths.push_back(n);
    for (std::size_t n : {4095u, 4096u, 4097u, 65507u, 65536u}) lengths.push_back(n);
    for (std::size_t n : lengths) {
      std::vector<std::byte> data(n);
      for (auto& b : data) b = static_cast<std::byte>(byte());
      std::array<unsigned char, 12> nonce;
      for (auto& b : nonce) b = byte();
      const std::size_t cut1 = n ? rng() % (n + 1) : 0, cut2 = cut1 + (n - cut1 ? rng() % (n - cut1 + 1) : 0);
      ASSERT_EQ(wide_gmac(g, key, nonce, data, cut1, cut2), openssl_gmac(key, nonce, data))
          << "key " << k << ", " << n << " bytes split at " << cut1 << " and " << cut2;
    }
  }
}

TEST(Ghash, TheAuthenticatorUsesItWhereTheCpuHasIt) {
  Secret secret{};
  secret[0] = std::byte{1};
  Status st;
  auto auth = Authenticator::create(secret, 0, 2, st);
  ASSERT_TRUE(auth) << st.text();
  // Its own check against OpenSSL's tag passed (else it would have kept OpenSSL's alone).
  EXPECT_EQ(auth->wide_ghash(), Ghash::available());
}

}  // namespace
}  // namespace optireduce::datagram
