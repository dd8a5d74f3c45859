// GHASH, the universal hash under AES-GCM and so under GMAC, over data given in pieces, 32
// blocks per reduction with VPCLMULQDQ (OpenSSL 3.0 hashes additional data eight blocks at a time with
// 128-bit carry-less multiplies, and the tag of every datagram was most of a clean call's cost
// beside the copies). Only the hash: the key H = AES_K(0^128) and the tag's mask AES_K(J0) come
// from OpenSSL's AES, so a tag made with it is GMAC's, bit for bit (authenticator.cpp checks that
// against OpenSSL once per key before it uses it; the tests check many lengths and splits).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>

namespace optireduce::datagram {

class Ghash {
 public:
  static constexpr std::size_t kBlock = 16;
  static constexpr std::size_t kStepBlocks = 64;  // blocks hashed per reduction
  // Whether this CPU runs the wide kernel (AVX-512F and BW, VPCLMULQDQ, PCLMULQDQ).
  static bool available();

  // Precomputes H^1 .. H^16. `h` is AES_K(0^128). Call only when available().
  explicit Ghash(std::span<const std::uint8_t, kBlock> h);

  void begin();
  void update(std::span<const std::byte> data);
  // Zero-pads what is left, hashes the length block (the data's length in bits, and no
  // ciphertext) and writes GHASH's result S.
  void finish(std::span<std::uint8_t, kBlock> s);

 private:
  // Powers of H in the byte-reflected form the kernel multiplies: wide_[j] holds the four powers
  // H^(n-4j) .. H^(n-4j-3) for blocks 4j+1 .. 4j+4 of a step of n blocks, first block first;
  // folded_[j] the xor of each one's two halves (Karatsuba's middle factor).
  alignas(64) std::array<std::array<std::uint8_t, 64>, kStepBlocks / 4> wide_{};
  alignas(64) std::array<std::array<std::uint8_t, 64>, kStepBlocks / 4> folded_{};
  alignas(16) std::array<std::uint8_t, kBlock> h1_{};
  alignas(16) std::array<std::uint8_t, kBlock> y_{};      // the running hash, byte-reflected
  alignas(16) std::array<std::uint8_t, kBlock> carry_{};  // a block not yet complete
  std::size_t carry_len_ = 0;
  std::uint64_t total_ = 0;  // bytes hashed so far
};

}  // namespace optireduce::datagram
