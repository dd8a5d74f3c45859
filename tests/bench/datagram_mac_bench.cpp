// Cost of the datagram tag (datagram/authenticator: UMAC-64) per datagram size, and per 16 MiB
// call: each rank tags ~24 MiB and verifies ~24 MiB of datagrams per call (scatter-reduce sends
// 3/4 of the buffer, all-gather 3/4 again, at 4 ranks). Measured beside it, the alternatives the
// choice was made against, so it can be re-made on another CPU: OpenSSL's AES-128-GMAC,
// Poly1305 (EVP_MAC, with a one-time key per datagram derived by AES) and nettle's own UMAC-64.
//   build-dg/bin/datagram_mac_bench [--benchmark_filter=...]
#include <benchmark/benchmark.h>
#include <nettle/umac.h>
#include <openssl/evp.h>

#include <array>
#include <cstring>
#include <vector>

#include "optireduce/datagram/authenticator.hpp"
#include "optireduce/datagram/sealer.hpp"

namespace {

using namespace optireduce::datagram;

constexpr std::size_t kEngineHeader = 56;

struct Pair {
  std::unique_ptr<Authenticator> sender, receiver;
  Pair() {
    const Secret secret{std::byte{7}};
    optireduce::Status s;
    sender = Authenticator::create(secret, 1, 4, s);
    receiver = Authenticator::create(secret, 0, 4, s);
  }
};

// One datagram of `datagram_bytes` on the wire, tagged by rank 1 and verified by rank 0.
void BM_UmacSealAndVerify(benchmark::State& state) {
  const auto datagram_bytes = static_cast<std::size_t>(state.range(0));
  Pair p;
  Sealer sealer(p.sender.get(), 1, 4);
  const std::vector<std::byte> header(kEngineHeader, std::byte{1});
  const std::vector<std::byte> payload(datagram_bytes - Header::kSize - kEngineHeader, std::byte{2});
  for (auto _ : state) {
    const HeaderBytes head = sealer.seal(0, Kind::data, header, payload);
    benchmark::DoNotOptimize(p.receiver->verify(head, header, payload));
  }
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations() * datagram_bytes * 2));
}
BENCHMARK(BM_UmacSealAndVerify)->Arg(1372)->Arg(1472)->Arg(8972)->Arg(65507);

// What one 16 MiB call costs a rank: 24 MiB tagged and 24 MiB verified in datagrams of the size.
void BM_UmacPerSixteenMiBCall(benchmark::State& state) {
  const auto datagram_bytes = static_cast<std::size_t>(state.range(0));
  const std::size_t datagrams = (24u << 20) / (datagram_bytes - Header::kSize - kEngineHeader);
  Pair p;
  Sealer sealer(p.sender.get(), 1, 4);
  const std::vector<std::byte> header(kEngineHeader, std::byte{1});
  const std::vector<std::byte> payload(datagram_bytes - Header::kSize - kEngineHeader, std::byte{2});
  for (auto _ : state) {
    for (std::size_t i = 0; i < datagrams; ++i) {
      const HeaderBytes head = sealer.seal(0, Kind::data, header, payload);
      benchmark::DoNotOptimize(p.receiver->verify(head, header, payload));
    }
  }
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations() * datagrams * datagram_bytes * 2));
  state.SetLabel("time per call = tag + verify of 24 MiB each");
}
BENCHMARK(BM_UmacPerSixteenMiBCall)->Arg(1372)->Arg(65507)->Unit(benchmark::kMillisecond);

// One tag per iteration of an alternative tag over `state.range(0)` bytes, each under the next
// nonce: (source 0, sequence) as the datagrams' own, 12 bytes.
using Nonce = std::array<unsigned char, 12>;
template <typename TagOne>
void run_tag_loop(benchmark::State& state, TagOne&& tag_one) {
  const std::vector<unsigned char> data(static_cast<std::size_t>(state.range(0)), 3);
  Nonce nonce{};
  std::uint64_t sequence = 0;
  for (auto _ : state) {
    ++sequence;
    std::memcpy(nonce.data() + 4, &sequence, sizeof sequence);
    tag_one(data, nonce);
  }
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations() * data.size()));
}

constexpr unsigned char kAlternativeKey[16] = {9};

// Poly1305 with a one-time key (two AES blocks of the nonce) per datagram.
void BM_Poly1305Tag(benchmark::State& state) {
  EVP_CIPHER_CTX* ecb = EVP_CIPHER_CTX_new();
  EVP_EncryptInit_ex(ecb, EVP_aes_128_ecb(), nullptr, kAlternativeKey, nullptr);
  EVP_CIPHER_CTX_set_padding(ecb, 0);
  EVP_MAC* mac = EVP_MAC_fetch(nullptr, "POLY1305", nullptr);
  EVP_MAC_CTX* ctx = EVP_MAC_CTX_new(mac);
  run_tag_loop(state, [&](const std::vector<unsigned char>& data, const Nonce& nonce) {
    unsigned char blocks[32] = {}, one_time[32], tag[16];
    std::memcpy(blocks, nonce.data(), nonce.size());
    std::memcpy(blocks + 16, nonce.data(), nonce.size());
    blocks[31] = 1;
    int out = 0;
    std::size_t tag_bytes = 0;
    EVP_EncryptUpdate(ecb, one_time, &out, blocks, sizeof blocks);
    EVP_MAC_init(ctx, one_time, sizeof one_time, nullptr);
    EVP_MAC_update(ctx, data.data(), data.size());
    EVP_MAC_final(ctx, tag, &tag_bytes, sizeof tag);
    benchmark::DoNotOptimize(tag);
  });
  EVP_MAC_CTX_free(ctx);
  EVP_MAC_free(mac);
  EVP_CIPHER_CTX_free(ecb);
}
BENCHMARK(BM_Poly1305Tag)->Arg(1372)->Arg(65507);

// The same unit of work for the tag in use: one tag, no verification.
void BM_UmacTag(benchmark::State& state) {
  const auto datagram_bytes = static_cast<std::size_t>(state.range(0));
  Pair p;
  Sealer sealer(p.sender.get(), 1, 4);
  const std::vector<std::byte> payload(datagram_bytes - Header::kSize, std::byte{2});
  for (auto _ : state) benchmark::DoNotOptimize(sealer.seal(0, Kind::data, {}, payload));
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations() * datagram_bytes));
  state.SetLabel(p.sender->wide_nh() ? "wide NH" : "nettle");
}
BENCHMARK(BM_UmacTag)->Arg(1372)->Arg(65507);

// Nettle's UMAC-64 alone (SSE2 NH): what the tag costs on a CPU without AVX-512.
void BM_NettleUmacTag(benchmark::State& state) {
  umac64_ctx ctx;
  umac64_set_key(&ctx, kAlternativeKey);
  run_tag_loop(state, [&](const std::vector<unsigned char>& data, const Nonce& nonce) {
    unsigned char tag[8];
    umac64_set_nonce(&ctx, nonce.size(), nonce.data());
    umac64_update(&ctx, data.size(), data.data());
    umac64_digest(&ctx, sizeof tag, tag);
    benchmark::DoNotOptimize(tag);
  });
}
BENCHMARK(BM_NettleUmacTag)->Arg(1372)->Arg(65507);

// OpenSSL's AES-128-GMAC (GCM with everything as additional data): the tag before UMAC-64.
void BM_OpenSslGmacTag(benchmark::State& state) {
  EVP_CIPHER_CTX* ctx = EVP_CIPHER_CTX_new();
  EVP_EncryptInit_ex(ctx, EVP_aes_128_gcm(), nullptr, kAlternativeKey, nullptr);
  run_tag_loop(state, [&](const std::vector<unsigned char>& data, const Nonce& nonce) {
    unsigned char tag[16], none[16];
    int out = 0;
    EVP_EncryptInit_ex(ctx, nullptr, nullptr, nullptr, nonce.data());
    EVP_EncryptUpdate(ctx, nullptr, &out, data.data(), static_cast<int>(data.size()));
    EVP_EncryptFinal_ex(ctx, none, &out);
    EVP_CIPHER_CTX_ctrl(ctx, EVP_CTRL_GCM_GET_TAG, sizeof tag, tag);
    benchmark::DoNotOptimize(tag);
  });
  EVP_CIPHER_CTX_free(ctx);
}
BENCHMARK(BM_OpenSslGmacTag)->Arg(1372)->Arg(65507);

}  // namespace

BENCHMARK_MAIN();
