#include "ghash.hpp"

#include <immintrin.h>

#include <algorithm>
#include <cstring>

// Field arithmetic as in Intel's white paper on carry-less multiplication for GCM: blocks are
// byte-reversed into registers, a product is four 64x64 carry-less multiplies (low, high and the
// two middle ones), the 256-bit result is shifted left by one bit (the field's bit order is
// reflected) and reduced modulo x^128 + x^7 + x^2 + x + 1 with shifts. Everything before the
// reduction is linear, so the products of a step are summed first and reduced once.

#define OR_GHASH_TARGET __attribute__((target("pclmul,ssse3,sse4.1,avx512f,avx512bw,vpclmulqdq")))

namespace optireduce::datagram {
namespace {

struct Wide {
  __m128i lo, mid, hi;
};

OR_GHASH_TARGET inline __m128i byte_swap(__m128i x) {
  return _mm_shuffle_epi8(x, _mm_set_epi8(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15));
}

OR_GHASH_TARGET inline __m512i byte_swap(__m512i x) {
  // (The masked forms below: GCC 12 warns on the unmasked ones' undefined upper parts.)
  const __m512i mask = _mm512_maskz_broadcast_i32x4(0xffff, _mm_set_epi8(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15));
  return _mm512_shuffle_epi8(x, mask);
}

// [hi:lo] plus mid shifted by 64 bits, times x, reduced.
OR_GHASH_TARGET inline __m128i reduce(__m128i lo, __m128i mid, __m128i hi) {
  __m128i t3 = _mm_xor_si128(lo, _mm_slli_si128(mid, 8));
  __m128i t6 = _mm_xor_si128(hi, _mm_srli_si128(mid, 8));
  // Shift the 256-bit [t6:t3] left by one bit.
  __m128i t7 = _mm_srli_epi32(t3, 31);
  __m128i t8 = _mm_srli_epi32(t6, 31);
  t3 = _mm_slli_epi32(t3, 1);
  t6 = _mm_slli_epi32(t6, 1);
  const __m128i t9 = _mm_srli_si128(t7, 12);
  t8 = _mm_slli_si128(t8, 4);
  t7 = _mm_slli_si128(t7, 4);
  t3 = _mm_or_si128(t3, t7);
  t6 = _mm_or_si128(_mm_or_si128(t6, t8), t9);
  // Reduce: first phase.
  t7 = _mm_xor_si128(_mm_xor_si128(_mm_slli_epi32(t3, 31), _mm_slli_epi32(t3, 30)), _mm_slli_epi32(t3, 25));
  t8 = _mm_srli_si128(t7, 4);
  t7 = _mm_slli_si128(t7, 12);
  t3 = _mm_xor_si128(t3, t7);
  // Second phase.
  __m128i t2 = _mm_xor_si128(_mm_xor_si128(_mm_srli_epi32(t3, 1), _mm_srli_epi32(t3, 2)), _mm_srli_epi32(t3, 7));
  t2 = _mm_xor_si128(t2, t8);
  t3 = _mm_xor_si128(t3, t2);
  return _mm_xor_si128(t6, t3);
}

OR_GHASH_TARGET inline __m128i multiply(__m128i a, __m128i b) {
  const __m128i lo = _mm_clmulepi64_si128(a, b, 0x00);
  const __m128i hi = _mm_clmulepi64_si128(a, b, 0x11);
  const __m128i mid = _mm_xor_si128(_mm_clmulepi64_si128(a, b, 0x10), _mm_clmulepi64_si128(a, b, 0x01));
  return reduce(lo, mid, hi);
}

OR_GHASH_TARGET inline __m128i fold_lanes(__m512i z) {
  return _mm_xor_si128(_mm_xor_si128(_mm512_maskz_extracti32x4_epi32(0xf, z, 0), _mm512_maskz_extracti32x4_epi32(0xf, z, 1)),
                       _mm_xor_si128(_mm512_maskz_extracti32x4_epi32(0xf, z, 2), _mm512_maskz_extracti32x4_epi32(0xf, z, 3)));
}

// One block into the running hash: y = (y ^ x) * H.
OR_GHASH_TARGET inline __m128i absorb_block(__m128i y, const std::uint8_t* block, __m128i h1) {
  const __m128i x = byte_swap(_mm_loadu_si128(reinterpret_cast<const __m128i*>(block)));
  return multiply(_mm_xor_si128(y, x), h1);
}

// kStepBlocks blocks: y = (y ^ x1) H^n ^ x2 H^(n-1) ^ ... ^ xn H. Karatsuba: three multiplies
// per block, the middle one by (h0 ^ h1), precomputed.
OR_GHASH_TARGET inline __m128i absorb_step(__m128i y, const std::uint8_t* p, const __m512i* powers, const __m512i* folded) {
  __m512i lo = _mm512_setzero_si512(), mid = lo, hi = lo;
  for (std::size_t j = 0; j < Ghash::kStepBlocks / 4; ++j) {
    __m512i x = byte_swap(_mm512_loadu_si512(p + 64 * j));
    if (j == 0) x = _mm512_xor_si512(x, _mm512_zextsi128_si512(y));
    const __m512i h = _mm512_load_si512(powers + j);
    lo = _mm512_xor_si512(lo, _mm512_clmulepi64_epi128(x, h, 0x00));
    hi = _mm512_xor_si512(hi, _mm512_clmulepi64_epi128(x, h, 0x11));
    // (x0 ^ x1) in both halves of each lane.
    const __m512i xf = _mm512_xor_si512(x, _mm512_maskz_shuffle_epi32(0xffff, x, _MM_PERM_BADC));
    mid = _mm512_xor_si512(mid, _mm512_clmulepi64_epi128(xf, _mm512_load_si512(folded + j), 0x00));
  }
  const __m128i l = fold_lanes(lo), h = fold_lanes(hi);
  return reduce(l, _mm_xor_si128(_mm_xor_si128(fold_lanes(mid), l), h), h);
}

}  // namespace

bool Ghash::available() {
  __builtin_cpu_init();
  return __builtin_cpu_supports("pclmul") && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
         __builtin_cpu_supports("vpclmulqdq");
}

OR_GHASH_TARGET Ghash::Ghash(std::span<const std::uint8_t, kBlock> h) {
  constexpr int n = static_cast<int>(kStepBlocks);
  __m128i power[n + 1];
  power[1] = byte_swap(_mm_loadu_si128(reinterpret_cast<const __m128i*>(h.data())));
  for (int k = 2; k <= n; ++k) power[k] = multiply(power[k - 1], power[1]);
  _mm_store_si128(reinterpret_cast<__m128i*>(h1_.data()), power[1]);
  for (int j = 0; j < n / 4; ++j)
    for (int i = 0; i < 4; ++i) {
      const __m128i p = power[n - 4 * j - i];
      _mm_storeu_si128(reinterpret_cast<__m128i*>(wide_[j].data() + 16 * i), p);
      _mm_storeu_si128(reinterpret_cast<__m128i*>(folded_[j].data() + 16 * i), _mm_xor_si128(p, _mm_srli_si128(p, 8)));
    }
  begin();
}

void Ghash::begin() {
  y_.fill(0);
  carry_len_ = 0;
  total_ = 0;
}

OR_GHASH_TARGET void Ghash::update(std::span<const std::byte> data) {
  if (data.empty()) return;  // (an empty span's pointer may be null, which memcpy must not get)
  const auto* p = reinterpret_cast<const std::uint8_t*>(data.data());
  std::size_t n = data.size();
  total_ += n;
  const __m128i h1 = _mm_load_si128(reinterpret_cast<const __m128i*>(h1_.data()));
  __m128i y = _mm_load_si128(reinterpret_cast<const __m128i*>(y_.data()));
  if (carry_len_) {
    const std::size_t take = std::min(kBlock - carry_len_, n);
    std::memcpy(carry_.data() + carry_len_, p, take);
    carry_len_ += take, p += take, n -= take;
    if (carry_len_ == kBlock) {
      y = absorb_block(y, carry_.data(), h1);
      carry_len_ = 0;
    }
  }
  const auto* powers = reinterpret_cast<const __m512i*>(wide_.data());
  const auto* folded = reinterpret_cast<const __m512i*>(folded_.data());
  for (; n >= kStepBlocks * kBlock; p += kStepBlocks * kBlock, n -= kStepBlocks * kBlock) y = absorb_step(y, p, powers, folded);
  for (; n >= kBlock; p += kBlock, n -= kBlock) y = absorb_block(y, p, h1);
  if (n) {
    std::memcpy(carry_.data(), p, n);
    carry_len_ = n;
  }
  _mm_store_si128(reinterpret_cast<__m128i*>(y_.data()), y);
}

OR_GHASH_TARGET void Ghash::finish(std::span<std::uint8_t, kBlock> s) {
  const __m128i h1 = _mm_load_si128(reinterpret_cast<const __m128i*>(h1_.data()));
  __m128i y = _mm_load_si128(reinterpret_cast<const __m128i*>(y_.data()));
  if (carry_len_) {
    std::memset(carry_.data() + carry_len_, 0, kBlock - carry_len_);
    y = absorb_block(y, carry_.data(), h1);
    carry_len_ = 0;
  }
  // len(A) || len(C) in bits, big-endian, 64 bits each; there is no ciphertext.
  std::array<std::uint8_t, kBlock> lengths{};
  const std::uint64_t bits = total_ * 8;
  for (int i = 0; i < 8; ++i) lengths[7 - i] = static_cast<std::uint8_t>(bits >> (8 * i));
  y = absorb_block(y, lengths.data(), h1);
  _mm_storeu_si128(reinterpret_cast<__m128i*>(s.data()), byte_swap(y));
  _mm_store_si128(reinterpret_cast<__m128i*>(y_.data()), y);
}

}  // namespace optireduce::datagram
