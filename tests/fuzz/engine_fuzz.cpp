// The engine half of datagram_fuzz: two real engines (optireduce::Engine, ranks 0 and 1 of one
// communicator, each in a thread) over inproc_datagram's transports, so everything the receive
// path and the dispatch accept reaches the engine's classification and its phases. Rank 1 is
// honest; rank 0 also takes the fuzzer's datagrams, one per poll step, during a few calls (exact
// over the transport, or calibration then bounded). A record with kEngineHeader becomes a
// well-formed engine header built from its first bytes against the call in progress (kind,
// flags, source, communicator, epoch near the current one, a real chunk's extent or a nudged one,
// stamps that may be NaN or infinite, payload of the right length or not), so the fuzzer reaches
// past the header checks; with kSign it is tagged as rank 1 would tag it.
//
// Checked: nothing crashes or hangs (every wait is bounded), and when no datagram could have been
// forged (nothing tagged by an insider; with authentication off, nothing from rank 1's address)
// the engine never saw anything rank 1 did not send, every call succeeded on both ranks, exact
// calls are exact and bounded calls count every wrong entry as dropped.
#include <cmath>
#include <cstring>
#include <limits>
#include <optional>
#include <thread>

#include "engine_fuzz.hpp"
#include "fuzz_input.hpp"
#include "inproc_datagram.hpp"
#include "optireduce/datagram/authenticator.hpp"
#include "optireduce/engine/engine/engine.hpp"
#include "optireduce/engine/tar/shard_layout.hpp"

namespace optireduce::fuzz {
namespace {

constexpr datagram::Secret kSecret{std::byte{0x0e}, std::byte{0x91}, std::byte{0x7a}};
constexpr int kCalls = 4;
constexpr std::uint32_t kChunkElems = 256;

float input_value(int rank, int call, std::uint64_t i) {
  return static_cast<float>(static_cast<int>((7 * i + 13 * static_cast<std::uint64_t>(call) + 3 * static_cast<std::uint64_t>(rank)) % 33) - 16);
}

std::uint64_t call_count(const Preamble& pre, int call) { return 200 + (pre.seed * 7u + 131u * static_cast<unsigned>(call)) % 1500; }

float stamp(std::uint8_t choice) {
  const float values[] = {0.0f, 150.0f, -1.0f, std::numeric_limits<float>::quiet_NaN(),
                          std::numeric_limits<float>::infinity(), 1e30f, 1e-42f};
  return values[choice % 7];
}

// The engine header and payload of a template record (see the file comment).
void engine_message(const WireHeader& now, std::uint64_t comm_id, std::size_t max_message, const Record& r,
                    std::vector<std::byte>& header, std::vector<std::byte>& payload) {
  std::uint8_t b[12] = {};
  for (std::size_t i = 0; i < sizeof b && i < r.bytes.size(); ++i) b[i] = std::to_integer<std::uint8_t>(r.bytes[i]);
  WireHeader h;
  h.kind = static_cast<MessageKind>(1 + b[0] % 7);
  h.flags = static_cast<std::uint16_t>(b[1] & 0x83);
  h.source = (b[2] & 0x80) ? b[2] % 3u : 1u;
  h.comm_id = (b[3] & 0x80) ? comm_id ^ b[3] : comm_id;
  h.epoch = static_cast<std::uint64_t>(std::max<std::int64_t>(0, static_cast<std::int64_t>(now.epoch) + b[4] % 5 - 2));
  h.total = (b[5] & 0x80) ? now.total + (b[5] & 0x7f) : now.total;
  const ShardLayout layout(h.total, kEngineRanks, static_cast<std::uint32_t>(std::min<std::size_t>(kChunkElems, (max_message - WireHeader::kEncodedSize) / 4)));
  const int owner = h.kind == MessageKind::scatter_chunk ? 0 : 1;
  const std::uint32_t chunks = std::max<std::uint32_t>(1, layout.chunks_in_shard(owner));
  const Extent extent = layout.chunk(owner, b[6] % chunks);
  h.offset = extent.offset + ((b[7] & 1) ? b[7] >> 1 : 0);
  h.length = extent.length + ((b[8] & 1) ? b[8] >> 1 : 0);
  h.stamp_scatter = stamp(b[9]);
  h.stamp_gather = stamp(b[10]);
  std::size_t payload_bytes = std::size_t{h.length} * sizeof(float);
  if (h.kind == MessageKind::peer_done || h.kind == MessageKind::alive) h.length = 0, payload_bytes = 0;
  if (h.kind == MessageKind::missing_list || h.kind == MessageKind::call_failed) payload_bytes = r.bytes.size() > 12 ? r.bytes.size() - 12 : 0;
  if (h.kind == MessageKind::missing_list) h.length = static_cast<std::uint32_t>(payload_bytes), h.offset = b[6];
  if (b[11] & 1) payload_bytes += b[11] >> 5;
  payload_bytes = std::min(payload_bytes, max_message - WireHeader::kEncodedSize);
  header.assign(WireHeader::kEncodedSize, std::byte{0});
  encode(h, EncodedHeader(header.data(), WireHeader::kEncodedSize));
  payload.assign(payload_bytes, std::byte{0});
  for (std::size_t i = 12; i < r.bytes.size() && i - 12 < payload_bytes; ++i) payload[i - 12] = r.bytes[i];
}

struct Outcome {
  bool created = false;
  std::vector<CallStats> calls;
  std::vector<std::uint64_t> differing;  // entries off the exact sum, per call
};

void run_calls(Engine& engine, const Preamble& pre, Outcome& out) {
  for (int c = 0; c < kCalls; ++c) {
    const std::uint64_t count = call_count(pre, c);
    std::vector<float> in(count), result(count, std::nanf(""));
    for (std::uint64_t i = 0; i < count; ++i) in[i] = input_value(engine.rank(), c, i);
    out.calls.push_back(engine.allreduce_sum(in.data(), result.data(), count, pre.bounded));
    std::uint64_t wrong = 0;
    for (std::uint64_t i = 0; i < count; ++i) wrong += result[i] != input_value(0, c, i) + input_value(1, c, i);
    out.differing.push_back(wrong);
  }
}

// Rank 0's fuzzed datagrams, built when the transport asks for the next one.
class Injector {
 public:
  Injector(const Preamble& pre, const std::vector<Record>& records, LoopTransport& rank0, const std::uint64_t& comm_id)
      : pre_(pre), records_(records), rank0_(rank0), comm_id_(comm_id) {
    Status s;
    if (pre.authenticate) auth_ = datagram::Authenticator::create(kSecret, 1, kEngineRanks, s);
    insider_ = datagram::Sealer(auth_.get(), 1, kEngineRanks);
    stranger_ = datagram::Sealer(nullptr, 1, kEngineRanks);
  }
  bool may_forge() const { return may_forge_; }

  std::optional<LoopBuffer> next() {
    if (at_ >= records_.size()) return std::nullopt;
    const std::uint8_t flags = records_[at_].flags;
    const int origins[] = {1, 0, kEngineRanks, 1};
    LoopBuffer b;
    b.from = origins[flags & kOriginMask];
    b.truncated = (flags & kTruncated) != 0;
    if (flags & kEngineHeader) {
      b.bytes = templated(records_[at_], (flags & kSign) != 0);
      ++at_;
    } else {
      b.bytes = gro_buffer(records_, at_, b.segment, udp::ReceivePath::kBufferBytes);
      if (flags & kSign) sign(insider_, b.bytes), may_forge_ = true;
      ++at_;
    }
    if (!pre_.authenticate && b.from == 1) may_forge_ = true;
    return b;
  }

 private:
  std::vector<std::byte> templated(const Record& r, bool tagged) {
    WireHeader now;
    if (!rank0_.last_sent(now)) now.epoch = 1;
    std::vector<std::byte> header, payload;
    engine_message(now, comm_id_, rank0_.traits().max_message_bytes, r, header, payload);
    if (tagged) may_forge_ = true;
    return wire((tagged ? insider_ : stranger_).seal(0, datagram::Kind::data, header, payload), header, payload);
  }

  const Preamble& pre_;
  const std::vector<Record>& records_;
  LoopTransport& rank0_;
  const std::uint64_t& comm_id_;
  std::unique_ptr<datagram::Authenticator> auth_;
  datagram::Sealer insider_, stranger_;
  std::size_t at_ = 0;
  bool may_forge_ = false;
};

EngineOptions engine_options(const Preamble& pre) {
  EngineOptions o;
  o.chunk_elems = kChunkElems;
  o.timeout = std::chrono::milliseconds(200);
  o.watchdog = std::chrono::milliseconds(2000);
  o.calibration_calls = 1;
  o.loss_budget = 1;
  o.hadamard = pre.hadamard ? HadamardMode::on : HadamardMode::off;
  return o;
}

void check_outcomes(const Preamble& pre, const Outcome (&out)[kEngineRanks], const LoopTransport& rank0, bool may_forge) {
  check(out[0].created && out[1].created, "an engine could not be created over the loop");
  if (may_forge) return;
  check(!rank0.foreign_delivered(), "without a forger, the engine was handed a message honest rank 1 did not send");
  for (const Outcome& o : out)
    for (std::size_t c = 0; c < o.calls.size(); ++c) {
      check(o.calls[c].ok(), "without a forger, a call failed");
      if (!pre.bounded) check(o.differing[c] == 0, "without a forger, an exact call is not exact");
      if (!pre.hadamard) check(o.differing[c] <= o.calls[c].dropped_entries, "a wrong entry not counted as dropped");
    }
}

}  // namespace

void run_engines(const Preamble& pre, const std::vector<Record>& records) {
  auto loop = std::make_shared<Loop>();
  std::unique_ptr<datagram::Authenticator> auth[kEngineRanks];
  Status s;
  for (int r = 0; r < kEngineRanks && pre.authenticate; ++r) auth[r] = datagram::Authenticator::create(kSecret, r, kEngineRanks, s);
  const LoopSettings settings{pre.authenticate, pre.bounded, pre.max_datagram()};
  auto t0 = std::make_unique<LoopTransport>(loop, 0, settings, auth[0].get());
  auto t1 = std::make_unique<LoopTransport>(loop, 1, settings, auth[1].get());
  LoopTransport& rank0 = *t0;
  std::uint64_t comm_id = 0;
  Injector injector(pre, records, rank0, comm_id);
  rank0.inject([&injector] { return injector.next(); });
  const EngineOptions options = engine_options(pre);
  Outcome out[kEngineRanks];
  // Creation is collective: rank 1 in a thread of its own; each rank leaves when its calls are done.
  std::thread peer([&] {
    Status st;
    auto e = Engine::create(1, kEngineRanks, std::move(t1), nullptr, std::make_unique<LoopBootstrap>(loop, 1), options, st);
    if ((out[1].created = e != nullptr)) run_calls(*e, pre, out[1]);
    loop->leave(1);
  });
  Status st;
  auto e = Engine::create(0, kEngineRanks, std::move(t0), nullptr, std::make_unique<LoopBootstrap>(loop, 0), options, st);
  if ((out[0].created = e != nullptr)) {
    comm_id = e->comm_id();
    run_calls(*e, pre, out[0]);
  }
  loop->leave(0);
  peer.join();
  check_outcomes(pre, out, rank0, injector.may_forge());
}

}  // namespace optireduce::fuzz
