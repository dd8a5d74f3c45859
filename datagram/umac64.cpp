#include "umac64.hpp"

#include <immintrin.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>

#include <algorithm>
#include <cstring>

#include "optireduce/cpu_features.hpp"

// RFC 4418's layers, in the arrangement nettle's umac64 uses (and checks against the RFC's test
// vectors): L1 is NH of each 1024-byte block plus its length in bits; with one block L2 passes
// that value on, with more it is a polynomial in the blocks' values modulo p64; L3 an inner
// product of L2's value with a key modulo p36, truncated to 32 bits.

#define OR_UMAC_WIDE __attribute__((target("avx512f,avx512bw")))

namespace optireduce::datagram {
namespace {

constexpr std::uint64_t kP64 = ~std::uint64_t{0} - 58;  // 2^64 - 59
constexpr std::uint64_t kP64Offset = 59;
constexpr std::uint64_t kP36 = (std::uint64_t{1} << 36) - 5;

std::uint32_t load_be32(const unsigned char* p) {
  return std::uint32_t{p[0]} << 24 | std::uint32_t{p[1]} << 16 | std::uint32_t{p[2]} << 8 | p[3];
}
std::uint64_t load_be64(const unsigned char* p) { return std::uint64_t{load_be32(p)} << 32 | load_be32(p + 4); }
std::uint32_t load_le32(const std::byte* p) {
  std::uint32_t v;
  std::memcpy(&v, p, sizeof v);
  return v;  // (x86: little-endian)
}

bool aes_block(EVP_CIPHER_CTX* ctx, const unsigned char* in, unsigned char* out) {
  int n = 0;
  return EVP_EncryptUpdate(ctx, out, &n, in, 16) == 1 && n == 16;
}

// RFC 4418's KDF: AES_K(index || counter), counter from 1, big-endian 64-bit each.
bool kdf(EVP_CIPHER_CTX* aes, std::uint64_t index, unsigned char* out, std::size_t bytes) {
  unsigned char block[16], t[16];
  for (int i = 0; i < 8; ++i) block[i] = static_cast<unsigned char>(index >> (56 - 8 * i));
  for (std::uint64_t counter = 1; bytes > 0; ++counter) {
    for (int i = 0; i < 8; ++i) block[8 + i] = static_cast<unsigned char>(counter >> (56 - 8 * i));
    if (!aes_block(aes, block, t)) return false;
    const std::size_t take = std::min<std::size_t>(bytes, 16);
    std::memcpy(out, t, take);
    out += take, bytes -= take;
  }
  OPENSSL_cleanse(t, sizeof t);
  return true;
}

EVP_CIPHER_CTX* aes_context(const unsigned char* key) {
  EVP_CIPHER_CTX* ctx = EVP_CIPHER_CTX_new();
  if (ctx && EVP_EncryptInit_ex(ctx, EVP_aes_128_ecb(), nullptr, key, nullptr) == 1 && EVP_CIPHER_CTX_set_padding(ctx, 0) == 1)
    return ctx;
  EVP_CIPHER_CTX_free(ctx);
  return nullptr;
}

// Arithmetic modulo p64 on values kept below 2^64 but not always below p64 (one reduction at
// the end): 2^64 = 59 mod p64.
// k * y, for k < 2^57.
std::uint64_t mul_mod_p64(std::uint64_t k, std::uint64_t y) {
  const unsigned __int128 t = static_cast<unsigned __int128>(k) * y;
  const std::uint64_t lo = static_cast<std::uint64_t>(t), hi = static_cast<std::uint64_t>(t >> 64);  // hi < 2^57
  const std::uint64_t s = lo + hi * kP64Offset;  // hi * 59 < 2^63
  return s < lo ? s + kP64Offset : s;            // a carry: s < 2^63, no second one
}
std::uint64_t add_mod_p64(std::uint64_t a, std::uint64_t b) {
  const std::uint64_t s = a + b;
  return s < a ? s + kP64Offset : s;  // a carry: s < 2^64 - 2, no second one
}

// NH of `bytes` (a multiple of 32) of `m` under `key` (a pass p starts p * 4 words into the L1 key).
std::uint64_t nh_plain(const std::uint32_t* key, const std::byte* m, std::size_t bytes) {
  std::uint64_t y = 0;
  for (std::size_t i = 0; i < bytes; i += 32, key += 8, m += 32)
    for (std::size_t j = 0; j < 4; ++j)
      y += std::uint64_t{static_cast<std::uint32_t>(load_le32(m + 4 * j) + key[j])} *
           static_cast<std::uint32_t>(load_le32(m + 16 + 4 * j) + key[4 + j]);
  return y;
}

OR_UMAC_WIDE std::uint64_t sum_lanes(__m512i v) {
  alignas(64) std::uint64_t lanes[8];
  _mm512_store_si512(lanes, v);
  std::uint64_t s = 0;
  for (std::uint64_t x : lanes) s += x;
  return s;
}

// The products of the words that pair, summed in 64-bit lanes: even words, then odd ones. (The
// masked forms throughout: GCC 12 warns of the unmasked ones' undefined inputs.)
OR_UMAC_WIDE inline __m512i products(__m512i a, __m512i b) {
  constexpr __mmask8 all = 0xff;
  const __m512i even = _mm512_maskz_mul_epu32(all, a, b);
  return _mm512_add_epi64(even, _mm512_maskz_mul_epu32(all, _mm512_maskz_srli_epi64(all, a, 32), _mm512_maskz_srli_epi64(all, b, 32)));
}

// Both passes of NH over `bytes` (a multiple of 128) from the start of a block, sixteen words at a time. Each 64 bytes hold two of
// NH's 32-byte groups; a word pairs with the one four words on, i.e. 128-bit lane 0 with lane 1
// and lane 2 with lane 3. Two 64-byte loads are rearranged into the lanes that pair (lo, hi) once,
// and the key, fixed, was rearranged alike at set-up.
OR_UMAC_WIDE void nh_wide(const std::uint32_t* wide_key, const std::byte* m, std::size_t bytes, std::uint64_t out[2]) {
  __m512i acc0 = _mm512_setzero_si512(), acc1 = acc0;
  for (std::size_t i = 0; i < bytes / 128; ++i) {
    const __m512i m0 = _mm512_loadu_si512(m + 128 * i), m1 = _mm512_loadu_si512(m + 128 * i + 64);
    const __m512i lo = _mm512_maskz_shuffle_i64x2(0xff, m0, m1, 0x88), hi = _mm512_maskz_shuffle_i64x2(0xff, m0, m1, 0xdd);
    const std::uint32_t* k0 = wide_key + 32 * i;
    const std::uint32_t* k1 = wide_key + Umac64::kBlock / 4 + 32 * i;
    acc0 = _mm512_add_epi64(acc0, products(_mm512_add_epi32(lo, _mm512_load_si512(k0)), _mm512_add_epi32(hi, _mm512_load_si512(k0 + 16))));
    acc1 = _mm512_add_epi64(acc1, products(_mm512_add_epi32(lo, _mm512_load_si512(k1)), _mm512_add_epi32(hi, _mm512_load_si512(k1 + 16))));
  }
  out[0] = sum_lanes(acc0);
  out[1] = sum_lanes(acc1);
}

}  // namespace

// The pad: AES under the derived key of the nonce with its last bit cleared; that bit picks
// which half of the block pads the tag.
struct Umac64::Pad {
  EVP_CIPHER_CTX* aes = nullptr;
  ~Pad() { EVP_CIPHER_CTX_free(aes); }
};

bool Umac64::available() { return cpu_features().avx512f && cpu_features().avx512bw; }

std::unique_ptr<Umac64> Umac64::create(std::span<const std::uint8_t, kKeyBytes> key) {
  std::unique_ptr<Umac64> u(new Umac64());
  EVP_CIPHER_CTX* aes = aes_context(key.data());
  if (!aes) return nullptr;
  unsigned char l1[kL1Words * 4], l2[24 * kPasses], l3a[64 * kPasses], l3b[4 * kPasses], pdf[16];
  const bool ok = kdf(aes, 1, l1, sizeof l1) && kdf(aes, 2, l2, sizeof l2) && kdf(aes, 3, l3a, sizeof l3a) &&
                  kdf(aes, 4, l3b, sizeof l3b) && kdf(aes, 0, pdf, sizeof pdf);
  EVP_CIPHER_CTX_free(aes);
  u->pad_ = std::make_unique<Pad>();
  if (ok) {
    u->pad_->aes = aes_context(pdf);
    for (std::size_t w = 0; w < kL1Words; ++w) u->l1_key_[w] = load_be32(l1 + 4 * w);
    for (std::size_t p = 0; p < kPasses; ++p) {
      const unsigned char* k = l2 + 24 * p;  // k64, then k128 (unused: messages stay below 2^24 bytes)
      u->l2_key_[p] = std::uint64_t{load_be32(k) & 0x01ffffffu} << 32 | (load_be32(k + 4) & 0x01ffffffu);
      for (std::size_t i = 0; i < 8; ++i) u->l3_key1_[p][i] = load_be64(l3a + 64 * p + 8 * i) % kP36;
      u->l3_key2_[p] = load_be32(l3b + 4 * p);
      // Lane j of lo in 128 bytes [0-3, 8-11, 16-19, 24-27] (words), of hi 4 words on.
      for (std::size_t i = 0; i < kBlock / 128; ++i)
        for (std::size_t lane = 0; lane < 4; ++lane)
          for (std::size_t j = 0; j < 4; ++j) {
            const std::size_t word = 32 * i + 8 * lane + j;
            u->wide_key_[p * kBlock / 4 + 32 * i + 4 * lane + j] = u->l1_key_[word + 4 * p];
            u->wide_key_[p * kBlock / 4 + 32 * i + 16 + 4 * lane + j] = u->l1_key_[word + 4 + 4 * p];
          }
    }
  }
  OPENSSL_cleanse(l1, sizeof l1);
  OPENSSL_cleanse(l2, sizeof l2);
  OPENSSL_cleanse(l3a, sizeof l3a);
  OPENSSL_cleanse(l3b, sizeof l3b);
  OPENSSL_cleanse(pdf, sizeof pdf);
  if (!ok || !u->pad_->aes) return nullptr;
  u->wide_ = available();
  u->begin();
  return u;
}

Umac64::~Umac64() {
  OPENSSL_cleanse(wide_key_.data(), sizeof wide_key_);
  OPENSSL_cleanse(l1_key_.data(), sizeof l1_key_);
  OPENSSL_cleanse(l2_key_.data(), sizeof l2_key_);
  OPENSSL_cleanse(l3_key1_.data(), sizeof l3_key1_);
  OPENSSL_cleanse(l3_key2_.data(), sizeof l3_key2_);
}

void Umac64::begin() {
  carry_len_ = 0;
  blocks_ = 0;
}

namespace {

// One step of RFC 4418's POLY with 64-bit words: y * k + m, where a word at or above 2^64 - 2^32
// goes in as a marker (p64 - 1) and then the word less 59.
inline std::uint64_t poly_step(std::uint64_t k, std::uint64_t y, std::uint64_t m) {
  if ((m >> 32) == 0xffffffffu) [[unlikely]] {
    y = add_mod_p64(mul_mod_p64(k, y), kP64 - 1);
    m -= kP64Offset;
  }
  return add_mod_p64(mul_mod_p64(k, y), m);
}

}  // namespace

void Umac64::poly(const std::uint64_t (&values)[kPasses]) {
  // The first block's value waits in y_ until a second one comes (a one-block message's L2 value
  // is that value itself); from the second on, the polynomial starts at 1.
  ++blocks_;
  for (std::size_t p = 0; p < kPasses; ++p) {
    if (blocks_ == 1) y_[p] = values[p];
    else if (blocks_ == 2) y_[p] = poly_step(l2_key_[p], poly_step(l2_key_[p], 1, y_[p]), values[p]);
    else y_[p] = poly_step(l2_key_[p], y_[p], values[p]);
  }
}

void Umac64::absorb_blocks(const std::byte* blocks, std::size_t count) {
  std::size_t i = 0;
  for (; i < count && blocks_ < 2; ++i) {  // the polynomial's start: poly() knows it
    std::uint64_t v[kPasses];
    nh_block(blocks + kBlock * i, v);
    for (auto& x : v) x += 8 * kBlock;
    poly(v);
  }
  if (i == count) return;
  // From the third block on, the running values stay in registers between the blocks.
  std::uint64_t y0 = y_[0], y1 = y_[1];
  const std::uint64_t k0 = l2_key_[0], k1 = l2_key_[1];
  blocks_ += count - i;
  for (; i < count; ++i) {
    std::uint64_t v[kPasses];
    nh_block(blocks + kBlock * i, v);
    y0 = poly_step(k0, y0, v[0] + 8 * kBlock);
    y1 = poly_step(k1, y1, v[1] + 8 * kBlock);
  }
  y_[0] = y0, y_[1] = y1;
}

void Umac64::nh_block(const std::byte* block, std::uint64_t (&v)[kPasses]) const {
  if (wide_) {
    nh_wide(wide_key_.data(), block, kBlock, v);
  } else {
    for (std::size_t p = 0; p < kPasses; ++p) v[p] = nh_plain(l1_key_.data() + 4 * p, block, kBlock);
  }
}

void Umac64::absorb_last(std::byte* data, std::size_t bytes) {
  // Zero-padded to a multiple of 32 bytes, at least 32 (an empty message is one block of them).
  const std::size_t nh_bytes = std::max<std::size_t>(32, (bytes + 31) / 32 * 32);
  std::memset(data + bytes, 0, nh_bytes - bytes);
  std::uint64_t v[kPasses] = {0, 0};
  const std::size_t wide_bytes = wide_ ? nh_bytes / 128 * 128 : 0;
  if (wide_bytes) nh_wide(wide_key_.data(), data, wide_bytes, v);
  for (std::size_t p = 0; p < kPasses; ++p)
    v[p] += nh_plain(l1_key_.data() + 4 * p + wide_bytes / 4, data + wide_bytes, nh_bytes - wide_bytes) + 8 * bytes;
  poly(v);
}

void Umac64::update(std::span<const std::byte> data) {
  if (data.empty()) return;  // (an empty span's pointer may be null, which memcpy must not get)
  const std::byte* p = data.data();
  std::size_t n = data.size();
  if (carry_len_) {
    const std::size_t take = std::min(kBlock - carry_len_, n);
    std::memcpy(carry_.data() + carry_len_, p, take);
    carry_len_ += take, p += take, n -= take;
    if (carry_len_ < kBlock) return;
    absorb_blocks(carry_.data(), 1);
    carry_len_ = 0;
  }
  if (n >= kBlock) {
    absorb_blocks(p, n / kBlock);
    p += n / kBlock * kBlock, n %= kBlock;
  }
  if (n) std::memcpy(carry_.data(), p, n), carry_len_ = n;
}

bool Umac64::finish(std::span<const std::uint8_t> nonce, std::span<std::uint8_t, kTagBytes> tag) {
  std::fill(tag.begin(), tag.end(), std::uint8_t{0});
  if (nonce.empty() || nonce.size() > 16 || blocks_ * kBlock + carry_len_ > kMaxMessage) return false;
  if (carry_len_ || blocks_ == 0) {
    absorb_last(carry_.data(), carry_len_);
    carry_len_ = 0;
  }
  unsigned char block[16] = {}, pad[16];
  std::memcpy(block, nonce.data(), nonce.size());
  const unsigned half = block[nonce.size() - 1] & 1u;
  block[nonce.size() - 1] &= 0xfe;
  if (!aes_block(pad_->aes, block, pad)) return false;
  for (std::size_t p = 0; p < kPasses; ++p) {
    std::uint64_t y = y_[p];
    if (blocks_ > 1 && y >= kP64) y -= kP64;  // (one block: its NH value as it is)
    std::uint64_t sum = 0;  // L2's 128-bit value is (0, y): the high words contribute nothing
    for (std::size_t i = 0; i < 4; ++i) sum += ((y >> (48 - 16 * i)) & 0xffffu) * l3_key1_[p][4 + i];
    const std::uint32_t word = static_cast<std::uint32_t>(sum % kP36) ^ l3_key2_[p];
    for (std::size_t b = 0; b < 4; ++b)
      tag[4 * p + b] = static_cast<std::uint8_t>(word >> (24 - 8 * b)) ^ pad[8 * half + 4 * p + b];
  }
  begin();
  return true;
}

}  // namespace optireduce::datagram
