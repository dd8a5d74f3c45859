// The wide UMAC-64 (datagram/umac64.hpp) gives RFC 4418's tag: the RFC's test vectors, and
// nettle's umac64 for every length and every way the data is split into pieces; the
// authenticator uses it on a CPU with AVX-512.
#include <gtest/gtest.h>
#include <nettle/umac.h>
#include <openssl/evp.h>

#include <array>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "optireduce/datagram/authenticator.hpp"
#include "optireduce/datagram/umac64.hpp"

namespace optireduce::datagram {
namespace {

using Key = std::array<std::uint8_t, 16>;
using Tag = std::array<std::uint8_t, 8>;

Tag nettle_tag(const Key& key, const std::vector<std::uint8_t>& nonce, const std::vector<std::byte>& data) {
  umac64_ctx c;
  umac64_set_key(&c, key.data());
  umac64_set_nonce(&c, nonce.size(), nonce.data());
  if (!data.empty()) umac64_update(&c, data.size(), reinterpret_cast<const std::uint8_t*>(data.data()));
  Tag t;
  umac64_digest(&c, t.size(), t.data());
  return t;
}

Tag wide_tag(Umac64& u, const std::vector<std::uint8_t>& nonce, const std::vector<std::byte>& data, std::size_t cut1,
             std::size_t cut2) {
  u.begin();
  u.update(std::span(data).first(cut1));
  u.update(std::span(data).subspan(cut1, cut2 - cut1));
  u.update(std::span(data).subspan(cut2));
  Tag t;
  EXPECT_TRUE(u.finish(nonce, t));
  return t;
}

std::string hex(const Tag& t) {
  static const char* digits = "0123456789ABCDEF";
  std::string s;
  for (std::uint8_t b : t) s += digits[b >> 4], s += digits[b & 15];
  return s;
}

TEST(Umac64, GivesTheTestVectorsOfRfc4418) {
  Key key;
  std::memcpy(key.data(), "abcdefghijklmnop", 16);
  const std::vector<std::uint8_t> nonce{'b', 'c', 'd', 'e', 'f', 'g', 'h', 'i'};
  auto u = Umac64::create(key);
  ASSERT_TRUE(u);
  const std::pair<std::size_t, const char*> vectors[] = {{0, "6E155FAD26900BE1"},
                                                          {3, "44B5CB542F220104"},
                                                          {1024, "26BF2F5D60118BD9"},
                                                          {32768, "27F8EF643B0D118D"},
                                                          {1u << 20, "A4477E87E9F55853"}};
  for (const auto& [length, expected] : vectors) {
    const std::vector<std::byte> data(length, std::byte{'a'});
    EXPECT_EQ(hex(wide_tag(*u, nonce, data, length / 3, length / 2)), expected) << length << " bytes of 'a'";
  }
}

TEST(Umac64, GivesNettlesTagForEveryLengthSplitAndNonce) {
  std::mt19937 rng(11);
  auto byte = [&] { return static_cast<std::uint8_t>(rng()); };
  for (int k = 0; k < 3; ++k) {
    Key key;
    for (auto& b : key) b = byte();
    auto u = Umac64::create(key);
    ASSERT_TRUE(u);
    std::vector<std::size_t> lengths;
    for (std::size_t n = 0; n <= 2100; n += (n < 300 ? 1 : 7)) lengths.push_back(n);
    for (std::size_t n : {1023u, 1024u, 1025u, 3072u, 4095u, 4096u, 4097u, 8972u, 65507u, 65536u}) lengths.push_back(n);
    for (std::size_t n : lengths) {
      std::vector<std::byte> data(n);
      for (auto& b : data) b = static_cast<std::byte>(byte());
      std::vector<std::uint8_t> nonce(1 + rng() % 16);
      for (auto& b : nonce) b = byte();
      const std::size_t cut1 = n ? rng() % (n + 1) : 0, cut2 = cut1 + (n - cut1 ? rng() % (n - cut1 + 1) : 0);
      ASSERT_EQ(wide_tag(*u, nonce, data, cut1, cut2), nettle_tag(key, nonce, data))
          << "key " << k << ", " << n << " bytes split at " << cut1 << " and " << cut2 << ", nonce of " << nonce.size();
    }
  }
}

// RFC 4418's L2 polynomial treats a block whose NH value is at or above 2^64 - 2^32 apart (a
// marker, then the value less 59): random data reaches it once in 2^32 blocks, so the block is
// made. NH pairs words i and i + 4 of each 32 bytes; with the L1 key known (the RFC's KDF), a
// message word m = v - k makes the sum m + k whatever v is.
TEST(Umac64, TakesABlockAboveTheMarkerAsNettleDoes) {
  Key key{};
  key[0] = 42;
  // L1 key words: AES_K(index 1 || counter), big-endian.
  std::vector<std::uint32_t> l1;
  EVP_CIPHER_CTX* aes = EVP_CIPHER_CTX_new();
  ASSERT_EQ(EVP_EncryptInit_ex(aes, EVP_aes_128_ecb(), nullptr, key.data(), nullptr), 1);
  EVP_CIPHER_CTX_set_padding(aes, 0);
  for (std::uint64_t counter = 1; l1.size() < 256; ++counter) {
    std::array<std::uint8_t, 16> in{}, out{};
    in[7] = 1;
    for (int i = 0; i < 8; ++i) in[8 + i] = static_cast<std::uint8_t>(counter >> (56 - 8 * i));
    int n = 0;
    ASSERT_EQ(EVP_EncryptUpdate(aes, out.data(), &n, in.data(), 16), 1);
    for (int w = 0; w < 4; ++w)
      l1.push_back(std::uint32_t{out[4 * w]} << 24 | std::uint32_t{out[4 * w + 1]} << 16 | std::uint32_t{out[4 * w + 2]} << 8 | out[4 * w + 3]);
  }
  EVP_CIPHER_CTX_free(aes);
  // First pass: sums of 0 everywhere but (a, b) = (2^32 - 1, 2^32 - 1) and (c, d) = (2^16, 2^16)
  // in the first 32 bytes: NH = 2^64 - 2^33 + 1 + 2^32, plus the block's 8192 bits.
  std::vector<std::uint32_t> sum(256, 0);
  sum[0] = sum[4] = 0xffffffffu;
  sum[1] = sum[5] = 1u << 16;
  std::vector<std::byte> data(3 * 1024);
  for (std::size_t block = 0; block < 3; ++block)
    for (std::size_t w = 0; w < 256; ++w) {
      const std::uint32_t m = (block == 1 ? sum[w] : 7u * static_cast<std::uint32_t>(w)) - (block == 1 ? l1[w] : 0);
      std::memcpy(data.data() + 1024 * block + 4 * w, &m, 4);  // little-endian, as NH reads it
    }
  auto u = Umac64::create(key);
  ASSERT_TRUE(u);
  const std::vector<std::uint8_t> nonce{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12};
  EXPECT_EQ(wide_tag(*u, nonce, data, 0, 0), nettle_tag(key, nonce, data));
  EXPECT_EQ(wide_tag(*u, nonce, data, 1000, 2049), nettle_tag(key, nonce, data));
  // The middle block alone (one block: no polynomial) and as the last of two.
  const std::vector<std::byte> two(data.begin(), data.begin() + 2048);
  EXPECT_EQ(wide_tag(*u, nonce, two, 0, 0), nettle_tag(key, nonce, two));
}

// An empty piece (whose pointer may be null) anywhere, also while a block is half full: the
// datagram fuzzer's first find under UBSan.
TEST(Umac64, TakesEmptyPiecesAnywhere) {
  Key key{};
  key[3] = 9;
  auto u = Umac64::create(key);
  ASSERT_TRUE(u);
  std::vector<std::byte> data(1500);
  for (std::size_t i = 0; i < data.size(); ++i) data[i] = static_cast<std::byte>(i * 31);
  const std::vector<std::uint8_t> nonce{5, 4, 3};
  const std::span<const std::byte> none;
  u->begin();
  u->update(none);
  u->update(std::span(data).first(24));
  u->update(none);
  u->update(std::span(data).subspan(24));
  u->update(none);
  Tag t;
  ASSERT_TRUE(u->finish(nonce, t));
  EXPECT_EQ(t, nettle_tag(key, nonce, data));
}

TEST(Umac64, RefusesAMessageBeyondItsLengthAndABadNonce) {
  auto u = Umac64::create(Key{});
  ASSERT_TRUE(u);
  Tag t;
  u->begin();
  EXPECT_FALSE(u->finish({}, t)) << "an empty nonce";
  const std::vector<std::uint8_t> long_nonce(17, 1);
  u->begin();
  EXPECT_FALSE(u->finish(long_nonce, t)) << "a nonce of 17 bytes";
  EXPECT_EQ(t, Tag{}) << "a refused tag is zero (no verification accepts it)";
}

TEST(Umac64, TheAuthenticatorUsesItWhereTheCpuHasIt) {
  Secret secret{};
  secret[0] = std::byte{1};
  Status st;
  auto auth = Authenticator::create(secret, 0, 2, st);
  ASSERT_TRUE(auth) << st.text();
  // Its own check against nettle's tag passed (else it would have kept nettle's alone).
  EXPECT_EQ(auth->wide_nh(), Umac64::available());
}

}  // namespace
}  // namespace optireduce::datagram
