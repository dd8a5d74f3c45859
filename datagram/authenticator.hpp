// The keyed tag of every datagram: UMAC-64 (RFC 4418, umac64.hpp) over the datagram header before
// its tag, the engine header and the payload. A forgery passes with probability about 2^-60 per
// try (RFC 4418, 64-bit tags; OpenSSH's umac-64).
//
// Keys: the job secret (rank 0's, carried in the addresses over the job's trusted MPI) derives one
// key per destination rank, so a datagram meant for one rank does not pass at another. Under a
// destination's key the nonce is (source rank, sequence): the sequence counts every datagram to
// that destination from 0 and never repeats, and the secret is drawn afresh for each transport,
// so no nonce is ever used twice under one key (UMAC's one requirement).
//
// Each key is computed with the wide NH of umac64.cpp only once it gave nettle's umac64 tag on a
// test message; otherwise (or without AVX-512) nettle's own umac64 computes it.
#pragma once

#include <array>
#include <cstddef>
#include <memory>
#include <span>
#include <vector>

#include "optireduce/status.hpp"
#include "wire_format.hpp"

namespace optireduce::datagram {

using Secret = std::array<std::byte, 16>;

// Draws a fresh secret from the kernel's random source.
Status draw_secret(Secret& out);

class Authenticator {
 public:
  // Keys for a rank `self` of `ranks`: one per destination for sealing, its own for verifying.
  static std::unique_ptr<Authenticator> create(const Secret& secret, int self, int ranks, Status& status);
  ~Authenticator();
  Authenticator(const Authenticator&) = delete;
  Authenticator& operator=(const Authenticator&) = delete;

  // Writes the tag into `head` (fields already encoded) for a datagram to `destination`.
  void seal(int destination, std::span<std::byte, Header::kSize> head, std::span<const std::byte> header,
            std::span<const std::byte> payload);

  // True when the tag in `head` is right for a datagram to this rank.
  bool verify(std::span<const std::byte, Header::kSize> head, std::span<const std::byte> header,
              std::span<const std::byte> payload);

  // Whether the tags are computed with the wide NH (umac64.hpp), having matched nettle's.
  bool wide_nh() const;

 private:
  struct Context;
  Authenticator() = default;
  // The wide UMAC for this key, kept only when its tag matches nettle's on a test message.
  static void add_wide_umac(Context& context, const std::array<unsigned char, 16>& key);
  static void compute(Context& context, std::span<const std::byte, Header::kSize> head, std::span<const std::byte> header,
               std::span<const std::byte> payload, std::span<std::byte, Header::kTagSize> tag);

  std::vector<std::unique_ptr<Context>> seal_;  // per destination (none for self)
  std::unique_ptr<Context> verify_;
};

}  // namespace optireduce::datagram
