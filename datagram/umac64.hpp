// UMAC-64 (RFC 4418; the MAC of OpenSSH's umac-64) over data given in pieces: a keyed universal
// hash of NH over 1024-byte blocks (two Toeplitz passes), a polynomial hash modulo 2^64 - 59 and
// an inner product modulo 2^36 - 5, xored with AES of the nonce. NH is multiplies and adds of
// 32-bit words, which AVX-512 does sixteen at a time, where GHASH needs carry-less multiplies of
// 128-bit blocks: the tag of a datagram costs a fraction of GMAC's. Keys and the pad come from
// OpenSSL's AES. The result is RFC 4418's, bit for bit: the tests check it against nettle's umac64
// for many lengths and splits, and authenticator.cpp against nettle once per key before use.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>

namespace optireduce::datagram {

class Umac64 {
 public:
  static constexpr std::size_t kTagBytes = 8;
  static constexpr std::size_t kKeyBytes = 16;
  static constexpr std::size_t kBlock = 1024;  // NH's block
  // Messages up to this length take L2's 64-bit polynomial alone (RFC 4418 5.2.2); longer ones
  // are refused (finish() returns false): datagrams are far shorter.
  static constexpr std::uint64_t kMaxMessage = std::uint64_t{1} << 24;

  // Whether this CPU runs the wide NH (AVX-512F and BW).
  static bool available();

  // Derives the hash and pad keys from `key` (AES-128, RFC 4418's KDF). Null when OpenSSL failed.
  static std::unique_ptr<Umac64> create(std::span<const std::uint8_t, kKeyBytes> key);
  ~Umac64();
  Umac64(const Umac64&) = delete;
  Umac64& operator=(const Umac64&) = delete;

  void begin();
  void update(std::span<const std::byte> data);
  // The tag of everything since begin() under `nonce` (1 to 16 bytes, never used twice with this
  // key). False (and a zero tag) when the message was too long or AES failed.
  bool finish(std::span<const std::uint8_t> nonce, std::span<std::uint8_t, kTagBytes> tag);

 private:
  static constexpr std::size_t kPasses = 2;  // 64 bits: two 32-bit UHASH outputs
  static constexpr std::size_t kL1Words = kBlock / 4 + 4 * (kPasses - 1);
  struct Pad;
  Umac64() = default;
  // NH of one whole block, both passes.
  void nh_block(const std::byte* block, std::uint64_t (&v)[kPasses]) const;
  // NH of whole blocks, each plus its length in bits, into the polynomials.
  void absorb_blocks(const std::byte* blocks, std::size_t count);
  // NH of the last, partial block (zero-padded in place to 32 bytes; at least 32), into the
  // polynomials. `data` is carry_.
  void absorb_last(std::byte* data, std::size_t bytes);
  // One block's values (one per pass) into L2's polynomials.
  void poly(const std::uint64_t (&values)[kPasses]);

  // NH key words for the wide kernel: per pass, per 128 bytes of a block, the words that pair
  // with the message's 128-bit lanes 0 and 2 of each 64 bytes, then those of lanes 1 and 3.
  alignas(64) std::array<std::uint32_t, kPasses * kBlock / 4> wide_key_{};
  std::array<std::uint32_t, kL1Words> l1_key_{};  // RFC order, for the last block and the plain kernel
  std::array<std::uint64_t, kPasses> l2_key_{};
  std::array<std::array<std::uint64_t, 8>, kPasses> l3_key1_{};
  std::array<std::uint32_t, kPasses> l3_key2_{};
  std::unique_ptr<Pad> pad_;
  bool wide_ = false;

  std::array<std::uint64_t, kPasses> y_{};  // L2's polynomials
  alignas(64) std::array<std::byte, kBlock> carry_{};
  std::size_t carry_len_ = 0;
  std::uint64_t blocks_ = 0;  // blocks absorbed (whole ones, and the last once finish() took it)
};

}  // namespace optireduce::datagram
