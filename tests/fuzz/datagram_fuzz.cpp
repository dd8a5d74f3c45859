// libFuzzer target over the datagram transport's parse-and-apply path (issue 5, part 3).
//
// A two-rank job seen from rank 0: a real Engine over a FuzzTransport whose poll() hands it
// datagrams exactly as the ofi transport does (ofi::parse_datagram under the job's key, the same
// dispatch by kind, FEC repair through ofi::ParityDecoder, the same InboundMessage), so every
// fuzzed datagram runs the tag check and then Engine::on_message -> apply. The transport is
// unreliable, so the first call is a calibration call (the bootstrap's exact sum, then a probe
// Transpose AllReduce over the transport) and later ones are bounded calls.
//
// Rank 1 is simulated by the transport: an honest peer (optional) that answers rank 0's sends
// with what a real rank 1 would send (its scatter contributions, the reduced all-gather chunks,
// "done"), optionally losing some of them and adding FEC parity. The fuzzer adds its own
// datagrams, and may ask the harness to sign them (a job insider) and to patch the fields it
// cannot guess (comm id, epoch, total), so inputs reach the engine's deep checks.
//
// Input: an 8-byte preamble (see Preamble), then records [u16 length][u8 flags][length bytes],
// each one datagram as it would come off the wire (without provider prefix).
//
// Checked after every call: it returned within its time bound; the guard zones around the output
// and the input itself are untouched (ASan checks the rest); when no fuzzed datagram was ever
// accepted, every output entry is finite, and exactly the sum when nothing was lost.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <fstream>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "bootstrap.hpp"
#include "datagram.hpp"
#include "engine.hpp"
#include "fec.hpp"
#include "optireduce/transport.hpp"
#include "shard_layout.hpp"
#include "wire_header.hpp"

namespace {

using namespace optireduce;
using ofi::DatagramHeader;
using ofi::DatagramKind;
using ofi::DatagramReject;

constexpr ofi::SipKey kKey{0x0123456789abcdefull, 0x0fedcba987654321ull};
constexpr int kRanks = 2;
constexpr std::uint32_t kChunkElems = 16;
constexpr std::size_t kMaxMessage = 1024;  // header + payload of one send (the provider's limit)
constexpr auto kTimeout = std::chrono::milliseconds(4);
constexpr unsigned kFecGroup = 4;
constexpr std::size_t kGuard = 16;  // guard floats on each side of the output
constexpr std::uint32_t kGuardBits = 0x7fa5a5a5u;  // a NaN no code path writes

// Engine header field offsets (wire_header.cpp's encode order).
constexpr std::size_t kOffMagic = 0, kOffComm = 16, kOffEpoch = 24, kOffTotal = 32;

// Record flags.
constexpr std::uint8_t kSign = 1 << 0;        // sign the datagram header with the job's key
constexpr std::uint8_t kPatchComm = 1 << 1;   // engine header: this communicator's id
constexpr std::uint8_t kPatchEpoch = 1 << 2;  // engine header: current epoch + (low byte % 8) - 3
constexpr std::uint8_t kBreak = 1 << 3;       // the next record comes at a later poll()
constexpr std::uint8_t kPatchTotal = 1 << 4;  // engine header: the current call's element count
constexpr std::uint8_t kPatchMagic = 1 << 5;  // engine header: magic and version

void put_le(std::byte* p, std::uint64_t v, int bytes) {
  for (int i = 0; i < bytes; ++i) p[i] = std::byte((v >> (8 * i)) & 0xff);
}
std::uint64_t get_le(const std::byte* p, int bytes) {
  std::uint64_t v = 0;
  for (int i = bytes - 1; i >= 0; --i) v = (v << 8) | std::to_integer<std::uint64_t>(p[i]);
  return v;
}

struct Preamble {
  static constexpr std::size_t kSize = 8;
  bool honest = true;     // b0 bit0: the simulated rank 1 answers
  bool fec = false;       // b0 bit1: FEC parity from rank 1, repair at rank 0
  HadamardMode hadamard = HadamardMode::off;  // b0 bits 2-3
  bool fill_local = false;  // b0 bit4
  bool fault_drop = false;  // b0 bit5: injected drops (OPTIREDUCE_FAULT_DROP)
  bool in_place = false;    // b0 bit6
  bool bootstrap_fails = false;  // b0 bit7: the second exact sum over the bootstrap fails
  std::uint32_t count_a = 0, count_b = 0;  // elements: calls 1-2, call 3
  std::uint8_t exact_mask = 0;    // bit k: call k is not allowed to be bounded
  std::uint16_t drop_mask = 0;    // honest datagram i is lost when bit i % 16 is set
  unsigned sync_interval = 1;

  explicit Preamble(const std::uint8_t* d) {
    honest = d[0] & 1;
    fec = d[0] & 2;
    static constexpr HadamardMode modes[4] = {HadamardMode::off, HadamardMode::on, HadamardMode::automatic,
                                              HadamardMode::off};
    hadamard = modes[(d[0] >> 2) & 3];
    fill_local = d[0] & 16;
    fault_drop = d[0] & 32;
    in_place = d[0] & 64;
    bootstrap_fails = d[0] & 128;
    count_a = (d[1] | (d[2] << 8)) % 1025;
    count_b = d[3] * 3u;
    exact_mask = d[4];
    drop_mask = static_cast<std::uint16_t>(d[5] | (d[6] << 8));
    sync_interval = 1 + d[7] % 3;
  }
};

struct Record {
  std::uint8_t flags = 0;
  std::vector<std::byte> bytes;
};

// All-gather: this rank's blob twice (rank 1 "sent" the same: same nonce, same figures). Exact
// sum: twice the input, as rank 1 holds the same data.
class FuzzBootstrap final : public Bootstrap {
 public:
  explicit FuzzBootstrap(int fail_at) : fail_at_(fail_at) {}
  std::vector<std::vector<std::byte>> allgather(std::span<const std::byte> mine) override {
    std::vector<std::byte> blob(mine.begin(), mine.end());
    return {blob, blob};
  }
  bool allreduce_sum(const float* input, float* output, std::uint64_t count) override {
    if (++sums_ == fail_at_) return false;
    for (std::uint64_t i = 0; i < count; ++i) output[i] = input[i] * 2.0f;
    return true;
  }

 private:
  int fail_at_;
  int sums_ = 0;
};

struct Shared {  // what the harness and the transport both see
  std::uint64_t comm_id = 0;
  std::vector<float> peer_input;  // rank 1's input (the same as rank 0's)
  std::uint64_t fuzz_accepted = 0;  // fuzzed datagrams that passed the tag and reached dispatch
  std::uint64_t honest_lost = 0;
};

class FuzzTransport final : public Transport {
 public:
  FuzzTransport(Shared& shared, const Preamble& pre, std::deque<Record>& records)
      : shared_(shared), pre_(pre), records_(records), encoder_(kFecGroup, kMaxMessage),
        decoders_(kRanks, ofi::ParityDecoder(kFecGroup, kMaxMessage)) {
    // The connection check every peer sends at creation: no engine header, an empty span.
    if (pre_.honest) queue(DatagramKind::hello, honest_sequence_++, {}, {});
  }

  std::vector<std::byte> local_address() const override { return {std::byte{0}}; }
  TransportStatus connect(int, const std::vector<std::vector<std::byte>>&, Clock::time_point) override {
    return TransportStatus::ok;
  }
  TransportStatus send(int peer, std::span<const std::byte> header, std::span<const std::byte> payload) override {
    if (peer != 1 || header.size() != WireHeader::kEncodedSize) std::abort();  // the engine's own contract
    WireHeader h;
    if (decode(header, h) != DecodeError::none) std::abort();
    // A missing-chunk bitmap's extent counts bytes, a chunk's elements.
    if ((h.phase == Phase::missing ? h.length : h.length * sizeof(float)) != payload.size()) std::abort();
    if (h.epoch != epoch_) {
      epoch_ = h.epoch;
      total_ = h.total;
      if (pre_.honest) send_honest_scatter(h);
    }
    if (!pre_.honest) return TransportStatus::ok;
    if (h.phase == Phase::scatter_reduce) {
      // Rank 1 reduces its chunk (its contribution equals ours) and sends it back.
      std::vector<float> reduced(h.length);
      std::memcpy(reduced.data(), payload.data(), payload.size());
      for (float& x : reduced) x *= 2.0f;
      WireHeader g = h;
      g.phase = Phase::all_gather;
      g.source = 1;
      g.flags &= WireHeader::kFlagLastSlice;
      honest(g, reduced);
    } else if (h.phase == Phase::done) {
      WireHeader d = h;
      d.source = 1;
      honest(d, {});
    } else if (h.phase == Phase::missing) {
      // Rank 1 lacks nothing (what it did not get is lost on the way to rank 0 anyway).
      WireHeader m = h;
      m.source = 1;
      honest_bytes(m, std::vector<std::byte>(h.length, std::byte{0}));
    }
    return TransportStatus::ok;
  }
  std::size_t sends_in_flight(int) const override { return 0; }

  TransportStatus poll(Clock::time_point deadline, const std::function<void(const InboundMessage&)>& on_message) override {
    std::size_t delivered = 0;
    while (!records_.empty()) {
      Record r = std::move(records_.front());
      records_.pop_front();
      delivered += deliver_fuzzed(r, on_message);
      if (r.flags & kBreak) break;
    }
    while (!honest_.empty()) {
      std::vector<std::byte> d = std::move(honest_.front());
      honest_.pop_front();
      delivered += deliver(d, on_message, nullptr);
    }
    if (delivered) return TransportStatus::ok;
    // Nothing more will come before the deadline: block until it, as a real transport does.
    if (deadline != Clock::time_point::min() && deadline > Clock::now() && deadline < Clock::now() + kTimeout * 4)
      std::this_thread::sleep_until(deadline);
    return TransportStatus::timeout;
  }
  std::size_t max_message_bytes() const override { return kMaxMessage; }
  bool reliable() const override { return false; }
  std::string describe() const override { return "fuzz"; }

 private:
  // Rank 1's scatter contributions to rank 0's shard, all at once when a call starts.
  void send_honest_scatter(const WireHeader& from) {
    const ShardLayout layout(from.total, kRanks, kChunkElems);
    const std::uint32_t chunks = layout.chunks_in_shard(0);
    for (std::uint32_t c = 0; c < chunks; ++c) {
      const Extent e = layout.chunk(0, c);
      WireHeader h;
      h.phase = Phase::scatter_reduce;
      h.flags = c + 3 >= chunks ? WireHeader::kFlagLastSlice : 0;
      h.source = 1;
      h.comm_id = from.comm_id;
      h.epoch = from.epoch;
      h.total = from.total;
      h.offset = e.offset;
      h.length = e.length;
      std::vector<float> values(e.length, 0.0f);
      if (shared_.peer_input.size() >= e.offset + e.length)
        std::memcpy(values.data(), shared_.peer_input.data() + e.offset, e.length * sizeof(float));
      honest(h, values);
    }
  }

  // Queues one data datagram from rank 1 (maybe lost), and a parity after each FEC group.
  void honest(const WireHeader& h, const std::vector<float>& payload) {
    const auto* p = reinterpret_cast<const std::byte*>(payload.data());
    honest_bytes(h, {p, payload.size() * sizeof(float)});
  }
  void honest_bytes(const WireHeader& h, std::span<const std::byte> payload) {
    std::vector<std::byte> header(WireHeader::kEncodedSize);
    encode(h, std::span<std::byte, WireHeader::kEncodedSize>(header.data(), header.size()));
    const std::uint32_t sequence = honest_sequence_++;
    const bool lost = pre_.drop_mask >> (sequence % 16) & 1;
    if (lost) ++shared_.honest_lost;
    else queue(DatagramKind::data, sequence, header, payload);
    if (!pre_.fec) return;
    encoder_.add(sequence, header, payload);
    if (!encoder_.full()) return;
    std::vector<std::byte> table, parity;
    encoder_.finish(table, parity);
    queue(DatagramKind::parity, honest_sequence_++, table, parity);
  }

  void queue(DatagramKind kind, std::uint32_t sequence, std::span<const std::byte> header, std::span<const std::byte> payload) {
    std::vector<std::byte> d(DatagramHeader::kSize + header.size() + payload.size());
    if (!header.empty()) std::memcpy(d.data() + DatagramHeader::kSize, header.data(), header.size());
    if (!payload.empty()) std::memcpy(d.data() + DatagramHeader::kSize + header.size(), payload.data(), payload.size());
    DatagramHeader h;
    h.kind = kind;
    h.source = 1;
    h.header_bytes = static_cast<std::uint16_t>(header.size());
    h.sequence = sequence;
    ofi::encode_datagram_header(h, kKey, header, std::span<std::byte, DatagramHeader::kSize>(d.data(), DatagramHeader::kSize));
    honest_.push_back(std::move(d));
  }

  std::size_t deliver_fuzzed(Record& r, const std::function<void(const InboundMessage&)>& on_message) {
    auto& d = r.bytes;
    const std::size_t e = DatagramHeader::kSize;  // the engine header starts here
    auto field = [&](std::size_t off, std::size_t n) { return d.size() >= e + off + n; };
    if ((r.flags & kPatchMagic) && field(kOffMagic, 6)) {
      put_le(&d[e], WireHeader::kMagic, 4);
      d[e + 4] = std::byte{WireHeader::kVersion};
    }
    if ((r.flags & kPatchComm) && field(kOffComm, 8)) put_le(&d[e + kOffComm], shared_.comm_id, 8);
    if ((r.flags & kPatchEpoch) && field(kOffEpoch, 8)) {
      const int delta = static_cast<int>(std::to_integer<unsigned>(d[e + kOffEpoch]) % 8) - 3;
      put_le(&d[e + kOffEpoch], epoch_ + static_cast<std::uint64_t>(static_cast<std::int64_t>(delta)), 8);
    }
    if ((r.flags & kPatchTotal) && field(kOffTotal, 8)) put_le(&d[e + kOffTotal], total_, 8);
    if ((r.flags & kSign) && d.size() >= e) {
      // The datagram header of a job insider: valid kind, a small source, a tagged length that
      // fits; the rest as fuzzed.
      DatagramHeader h;
      const unsigned kind = std::to_integer<unsigned>(d[5]);
      h.kind = static_cast<DatagramKind>(kind >= 1 && kind <= 5 ? kind : 1 + kind % 5);
      h.source = static_cast<std::uint16_t>(std::to_integer<unsigned>(d[6]) % 4);
      const std::size_t body = d.size() - e;
      h.header_bytes = static_cast<std::uint16_t>(get_le(&d[8], 2) % (std::min(body, DatagramHeader::kMaxTaggedHeader) + 1));
      h.sequence = static_cast<std::uint32_t>(get_le(&d[12], 4));
      ofi::encode_datagram_header(h, kKey, std::span<const std::byte>(d).subspan(e, h.header_bytes),
                                  std::span<std::byte, DatagramHeader::kSize>(d.data(), DatagramHeader::kSize));
    }
    bool accepted = false;
    const std::size_t n = deliver(d, on_message, &accepted);
    if (accepted) ++shared_.fuzz_accepted;
    return n;
  }

  // OfiTransport::deliver and deliver_body, minus the provider's source address check.
  std::size_t deliver(std::span<const std::byte> datagram, const std::function<void(const InboundMessage&)>& on_message,
                      bool* accepted) {
    DatagramHeader h;
    std::span<const std::byte> body;
    if (ofi::parse_datagram(datagram, kKey, kRanks, h, body) != DatagramReject::none) return 0;
    if (h.source == 0) return 0;  // "from" this rank
    if (accepted) *accepted = true;
    switch (h.kind) {
      case DatagramKind::hello:
        return 0;
      case DatagramKind::ping:
      case DatagramKind::pong:
        if (h.header_bytes != 8 || body.size() != 8) return 0;
        (void)get_le(body.data(), 8);
        return 0;
      case DatagramKind::data:
        if (pre_.fec) decoders_[h.source].add(h.sequence, body);
        return deliver_body(h.source, body, h.header_bytes, on_message);
      case DatagramKind::parity: {
        if (!pre_.fec) return 0;
        std::vector<std::byte> repaired;
        std::size_t header_bytes = 0;
        if (decoders_[h.source].repair(h.sequence, body.first(h.header_bytes), body.subspan(h.header_bytes), repaired,
                                       header_bytes))
          return deliver_body(h.source, repaired, header_bytes, on_message);
        return 0;
      }
    }
    return 0;
  }

  static std::size_t deliver_body(int source, std::span<const std::byte> body, std::size_t header_bytes,
                                  const std::function<void(const InboundMessage&)>& on_message) {
    on_message(ofi::inbound_message(source, body, header_bytes));
    return 1;
  }

  Shared& shared_;
  const Preamble& pre_;
  std::deque<Record>& records_;
  std::deque<std::vector<std::byte>> honest_;
  std::uint32_t honest_sequence_ = 0;
  ofi::ParityEncoder encoder_;
  std::vector<ofi::ParityDecoder> decoders_;
  std::uint64_t epoch_ = 0, total_ = 0;
};

std::unique_ptr<Engine> make_engine(Shared& shared, const Preamble& pre, std::deque<Record>& records) {
  EngineOptions o;
  o.chunk_elems = kChunkElems;
  o.timeout = kTimeout;
  o.calibration_calls = 1;
  o.sync_interval = pre.sync_interval;
  o.reliable_calls_after_overrun = 2;
  o.fill = pre.fill_local ? FillPolicy::local : FillPolicy::zero;
  o.hadamard = pre.hadamard;
  o.hadamard_block_log2 = 8;
  o.faults.drop = pre.fault_drop ? 0.25 : 0.0;
  o.faults.seed = 7;
  std::string error;
  auto engine = Engine::create(0, kRanks, std::make_unique<FuzzTransport>(shared, pre, records),
                               std::make_unique<FuzzBootstrap>(pre.bootstrap_fails ? 2 : -1), o, error);
  if (!engine) {
    std::fprintf(stderr, "datagram_fuzz: Engine::create failed: %s\n", error.c_str());
    std::abort();
  }
  shared.comm_id = engine->comm_id();
  return engine;
}

float value_at(std::size_t i) { return static_cast<float>(static_cast<int>(i % 13) - 6) * 0.75f + 0.125f; }

void check(bool ok, const char* what, std::uint64_t call) {
  if (ok) return;
  std::fprintf(stderr, "datagram_fuzz: invariant violated at call %llu: %s\n", static_cast<unsigned long long>(call), what);
  std::abort();
}

void run_one(const std::uint8_t* data, std::size_t size) {
  if (size < Preamble::kSize) return;
  const Preamble pre(data);
  std::deque<Record> records;
  for (std::size_t at = Preamble::kSize; at + 3 <= size && records.size() < 64;) {
    const std::size_t length = data[at] | (data[at + 1] << 8);
    Record r;
    r.flags = data[at + 2];
    at += 3;
    const std::size_t n = std::min(length, size - at);
    r.bytes.assign(reinterpret_cast<const std::byte*>(data + at), reinterpret_cast<const std::byte*>(data + at + n));
    at += n;
    records.push_back(std::move(r));
  }

  Shared shared;
  auto engine = make_engine(shared, pre, records);
  for (std::uint64_t call = 0; call < 3; ++call) {
    const std::size_t count = call < 2 ? pre.count_a : pre.count_b;
    std::vector<float> input(count);
    for (std::size_t i = 0; i < count; ++i) input[i] = value_at(i);
    shared.peer_input = input;
    std::vector<float> buffer(count + 2 * kGuard);
    std::uint32_t guard = kGuardBits;
    for (std::size_t i = 0; i < buffer.size(); ++i) std::memcpy(&buffer[i], &guard, sizeof guard);
    float* out = buffer.data() + kGuard;
    if (pre.in_place && count) std::memcpy(out, input.data(), count * sizeof(float));
    const float* in = pre.in_place ? out : input.data();
    const bool bounded = !(pre.exact_mask >> call & 1);

    const auto start = Clock::now();
    const CallStats stats = engine->allreduce_sum(in, out, count, bounded);
    const auto took = Clock::now() - start;

    // Bounded in time: a calibration call is an exact sum plus a probe capped at the timeout,
    // any other call is capped at the timeout. The slack absorbs sanitizers and a loaded host.
    check(took < 2 * kTimeout + std::chrono::seconds(2), "call overran its time bound", call);
    for (std::size_t i = 0; i < kGuard; ++i) {
      std::uint32_t lo, hi;
      std::memcpy(&lo, &buffer[i], sizeof lo);
      std::memcpy(&hi, &buffer[kGuard + count + i], sizeof hi);
      check(lo == kGuardBits && hi == kGuardBits, "write outside the output buffer", call);
    }
    if (!pre.in_place)
      for (std::size_t i = 0; i < count; ++i) check(input[i] == value_at(i), "input modified", call);
    if (stats.status == CallStatus::ok && shared.fuzz_accepted == 0) {
      // Nothing but the honest peer's data and the engine's own fills: finite values only, and
      // the exact sum when nothing was lost or transformed.
      for (std::size_t i = 0; i < count; ++i) check(std::isfinite(out[i]), "non-finite entry without a fuzzed message", call);
      if (stats.dropped_entries == 0 && !stats.transformed && stats.kind != CallKind::fallback)
        for (std::size_t i = 0; i < count; ++i) check(out[i] == 2.0f * value_at(i), "wrong sum with nothing lost", call);
    }
    if (std::getenv("OPTIREDUCE_FUZZ_VERBOSE")) {
      const auto& r = engine->rejects();
      std::fprintf(stderr,
                   "call %llu: %s %s, %zu floats, dropped %llu, filled %llu, transformed %d, %.0f us; fuzz accepted %llu, "
                   "honest lost %llu; engine rejects malformed %llu foreign %llu stale %llu misplaced %llu duplicate %llu "
                   "overflow %llu\n",
                   static_cast<unsigned long long>(call), to_string(stats.kind), to_string(stats.status), count,
                   static_cast<unsigned long long>(stats.dropped_entries), static_cast<unsigned long long>(stats.filled_entries),
                   int(stats.transformed), std::chrono::duration<double, std::micro>(took).count(),
                   static_cast<unsigned long long>(shared.fuzz_accepted), static_cast<unsigned long long>(shared.honest_lost),
                   static_cast<unsigned long long>(r.malformed), static_cast<unsigned long long>(r.foreign),
                   static_cast<unsigned long long>(r.stale), static_cast<unsigned long long>(r.misplaced),
                   static_cast<unsigned long long>(r.duplicate), static_cast<unsigned long long>(r.overflow));
    }
    if (stats.status == CallStatus::broken || stats.status == CallStatus::transport_error ||
        stats.status == CallStatus::timeout) {
      engine.reset();
      engine = make_engine(shared, pre, records);
    }
  }
}

// Seed corpus: OPTIREDUCE_FUZZ_WRITE_SEEDS=<dir> ./datagram_fuzz writes it and exits.
void write_seeds(const char* dir) {
  struct Builder {
    std::vector<std::uint8_t> bytes;
    Builder(std::uint8_t mode, std::uint16_t count, std::uint8_t count_b, std::uint8_t exact, std::uint16_t drops) {
      bytes = {mode, std::uint8_t(count & 0xff), std::uint8_t(count >> 8), count_b, exact, std::uint8_t(drops & 0xff),
               std::uint8_t(drops >> 8), 0};
    }
    // One engine message from rank 1 in a signed datagram; comm id, epoch (+delta) and total patched.
    void message(Phase phase, std::uint64_t offset, std::uint32_t length, int epoch_delta, std::uint8_t extra_flags = 0,
                 DatagramKind kind = DatagramKind::data) {
      const std::size_t payload = phase == Phase::missing ? length : length * sizeof(float);  // bitmap bytes
      WireHeader h;
      h.phase = phase;
      h.source = 1;
      h.offset = offset;
      h.length = length;
      h.epoch = static_cast<std::uint64_t>(epoch_delta + 3);
      h.total = offset + length;
      std::vector<std::byte> d(DatagramHeader::kSize + WireHeader::kEncodedSize + payload);
      encode(h, std::span<std::byte, WireHeader::kEncodedSize>(d.data() + DatagramHeader::kSize, WireHeader::kEncodedSize));
      if (phase == Phase::missing)
        std::fill(d.begin() + DatagramHeader::kSize + WireHeader::kEncodedSize, d.end(), std::byte{0x05});
      for (std::uint32_t i = 0; i < length && phase != Phase::missing; ++i) {
        const float x = 1.5f + static_cast<float>(i);
        std::memcpy(d.data() + DatagramHeader::kSize + WireHeader::kEncodedSize + i * sizeof(float), &x, sizeof x);
      }
      DatagramHeader dh;
      dh.kind = kind;
      dh.source = 1;
      dh.header_bytes = WireHeader::kEncodedSize;
      dh.sequence = 1000;
      ofi::encode_datagram_header(dh, kKey, std::span<const std::byte>(d).subspan(DatagramHeader::kSize, WireHeader::kEncodedSize),
                                  std::span<std::byte, DatagramHeader::kSize>(d.data(), DatagramHeader::kSize));
      raw(d, kSign | kPatchComm | kPatchEpoch | kPatchTotal | extra_flags);
    }
    void raw(const std::vector<std::byte>& d, std::uint8_t flags) {
      bytes.push_back(std::uint8_t(d.size() & 0xff));
      bytes.push_back(std::uint8_t(d.size() >> 8));
      bytes.push_back(flags);
      for (std::byte b : d) bytes.push_back(std::to_integer<std::uint8_t>(b));
    }
  };
  std::vector<std::pair<std::string, Builder>> seeds;
  seeds.emplace_back("honest_clean", Builder(0x01, 100, 40, 0, 0));
  seeds.emplace_back("honest_fec_lossy", Builder(0x03, 300, 90, 0, 0x0104));
  seeds.emplace_back("honest_hadamard_fill_local", Builder(0x01 | 0x04 | 0x10, 600, 0, 0, 0x0010));
  seeds.emplace_back("exact_in_place_bootstrap_fails", Builder(0x01 | 0x40 | 0x80, 64, 64, 0x02, 0));
  {
    Builder b(0x01, 100, 40, 0, 0);
    b.message(Phase::scatter_reduce, 0, 16, 0);  // a duplicate of rank 1's first contribution
    b.message(Phase::all_gather, 50, 16, 0, kBreak);
    b.message(Phase::scatter_reduce, 16, 16, 1);  // early: the next call's
    seeds.emplace_back("signed_chunks", b);
  }
  {
    Builder b(0x00, 100, 100, 0, 0);  // no honest peer: the fuzzed chunks are all rank 0 gets
    for (std::uint64_t off = 0; off < 50; off += 16) b.message(Phase::scatter_reduce, off, std::min<std::uint32_t>(16, 50 - off), 0);
    for (std::uint64_t off = 50; off < 100; off += 16) b.message(Phase::all_gather, off, std::min<std::uint32_t>(16, 100 - off), 0);
    b.message(Phase::done, 0, 0, 0);
    seeds.emplace_back("signed_whole_call", b);
  }
  {
    Builder b(0x01, 100, 100, 0, 0);
    b.message(Phase::missing, 0, 1, 0);  // rank 1 "lacks" chunks 0 and 2: every rank fills them
    b.message(Phase::missing, 0, 1, 1);
    seeds.emplace_back("signed_missing_bitmap", b);
  }
  {
    Builder b(0x03, 200, 0, 0, 0);
    b.message(Phase::scatter_reduce, 0, 16, 0, 0, DatagramKind::parity);
    std::vector<std::byte> ping(DatagramHeader::kSize + 8, std::byte{0});
    ping[5] = std::byte{4};
    ping[8] = std::byte{8};
    b.raw(ping, kSign);
    std::vector<std::byte> stranger(90, std::byte{0x41});
    b.raw(stranger, 0);
    seeds.emplace_back("parity_ping_stranger", b);
  }
  for (const auto& [name, b] : seeds) {
    const std::string path = std::string(dir) + "/" + name;
    std::ofstream(path, std::ios::binary).write(reinterpret_cast<const char*>(b.bytes.data()), static_cast<std::streamsize>(b.bytes.size()));
    std::printf("%s (%zu bytes)\n", path.c_str(), b.bytes.size());
  }
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  if (const char* dir = std::getenv("OPTIREDUCE_FUZZ_WRITE_SEEDS")) {
    write_seeds(dir);
    std::exit(0);
  }
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  run_one(data, size);
  return 0;
}
