// libFuzzer target over the datagram transports' receive path: the real one of udp/
// (udp::ReceivePath: GRO splitting, the rank behind each source address) feeding the one
// dispatch of datagram/ (validation, tag, FEC repair) and its inbound handler (handshake, flow
// window, data for the engine), seen from rank 0 of a three-rank job.
//
// Rank 1 is honest: the harness builds its datagrams with the real sealer (data, parity, hello,
// ping, pong), some of them lost on the way. The fuzzer adds its own datagrams from any address
// (rank 1's, rank 2's, rank 0's own, a stranger's), joined into GRO buffers or marked truncated,
// and may sign them as a job insider would, so inputs reach past the tag.
//
// Input: a 3-byte preamble (see Preamble), then records [u16 length][u8 flags][u8 extra][bytes].
//
// With bit 4 of the preamble the same records feed two real engines instead (engine_fuzz.cpp).
//
// Checked after every buffer: every message handed to the engine comes from rank 1 or 2, views
// memory inside what was fed, and, unless an insider signed something, is byte for byte a
// message honest rank 1 sent (nothing forged passes; with authentication off, nothing from an
// address that is not a rank's); every segment is counted, accepted or rejected; answers go only
// to ranks, as hellos or pongs.
#include <arpa/inet.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <set>
#include <string>
#include <vector>

#include "optireduce/byte_order.hpp"
#include "optireduce/datagram/authenticator.hpp"
#include "optireduce/datagram/fec.hpp"
#include "optireduce/datagram/inbound_handler.hpp"
#include "optireduce/datagram/sealer.hpp"
#include "optireduce/udp/receive_path.hpp"
#include "optireduce/udp/segmentation.hpp"
#include "engine_fuzz.hpp"
#include "fuzz_input.hpp"

namespace {

using namespace optireduce;
using namespace optireduce::fuzz;
using datagram::Kind;

constexpr int kRanks = 3;
constexpr unsigned kFecGroup = 4;
constexpr datagram::Secret kSecret{std::byte{0x5e}, std::byte{0xc7}, std::byte{0x01}};

class Replies final : public datagram::ControlReplies {
 public:
  void reply(int peer, Kind kind, std::span<const std::byte> body) override {
    check(peer >= 1 && peer < kRanks, "an answer to a rank outside the job or to itself");
    check(kind == Kind::hello || kind == Kind::pong, "an answer that is neither hello nor pong");
    check(body.size() == (kind == Kind::hello ? datagram::kHelloBytes : datagram::kValueBytes), "an answer's body length");
  }
};

// Rank 0's receive side, as udp::UdpTransport builds it, and honest rank 1.
struct Job {
  const Preamble& pre;
  std::unique_ptr<datagram::Authenticator> auth0, auth1, auth_insider[kRanks];
  datagram::Sealer honest, insider[kRanks];
  TransportCounters counters;
  datagram::Handshake handshake{0, kRanks};
  std::vector<datagram::FlowWindow> windows = std::vector<datagram::FlowWindow>(kRanks, datagram::FlowWindow(1 << 20));
  Replies replies;
  std::unique_ptr<datagram::ReceiveDispatch> dispatch;
  std::unique_ptr<datagram::InboundHandler> inbound;
  std::unique_ptr<udp::ReceivePath> path;
  sockaddr_in address[kRanks + 1]{};  // ranks 0..2, then the stranger
  datagram::ParityEncoder encoder{kFecGroup};
  std::set<std::vector<std::byte>> honest_messages;  // engine header + payload
  bool insider_signed = false;

  explicit Job(const Preamble& p) : pre(p) {
    Status s;
    auth0 = datagram::Authenticator::create(kSecret, 0, kRanks, s);
    auth1 = datagram::Authenticator::create(kSecret, 1, kRanks, s);
    for (int r = 0; r < kRanks; ++r) auth_insider[r] = datagram::Authenticator::create(kSecret, r, kRanks, s);
    honest = datagram::Sealer(pre.authenticate ? auth1.get() : nullptr, 1, kRanks);
    for (int r = 0; r < kRanks; ++r) insider[r] = datagram::Sealer(pre.authenticate ? auth_insider[r].get() : nullptr, r, kRanks);
    dispatch = std::make_unique<datagram::ReceiveDispatch>(0, kRanks, pre.authenticate ? auth0.get() : nullptr,
                                                           pre.fec ? kFecGroup : 0, pre.max_datagram());
    inbound = std::make_unique<datagram::InboundHandler>(handshake, windows, replies);
    for (int r = 0; r <= kRanks; ++r) {
      address[r].sin_family = AF_INET;
      address[r].sin_addr.s_addr = htonl(0x7f000001u + (r == kRanks ? 1 : 0));
      address[r].sin_port = htons(static_cast<std::uint16_t>(4000 + r));
    }
    path = std::make_unique<udp::ReceivePath>(*dispatch, std::vector<sockaddr_in>(address, address + kRanks), counters);
  }
};

// Honest rank 1's next datagram to rank 0 (empty when it is lost), and a parity behind a full group.
std::vector<std::vector<std::byte>> honest_datagrams(Job& job, const Record& r) {
  std::vector<std::vector<std::byte>> out;
  if (r.flags & kHonestControl) {
    const Kind kinds[] = {Kind::hello, Kind::ping, Kind::pong};
    const Kind kind = kinds[r.extra % 3];
    const auto value = datagram::encode_value(r.extra * 1000u);
    const std::byte hello[1] = {std::byte(static_cast<unsigned char>(r.extra & 3))};
    const std::span<const std::byte> body = kind == Kind::hello ? std::span<const std::byte>(hello) : std::span<const std::byte>(value);
    out.push_back(wire(job.honest.seal(0, kind, {}, body), {}, body));
    return out;
  }
  std::vector<std::byte> header(56), payload(std::min<std::size_t>(8u * r.extra, job.pre.max_datagram() - datagram::Header::kSize - 56 - 70));
  for (std::size_t i = 0; i < header.size(); ++i) header[i] = std::byte(static_cast<unsigned char>(job.pre.seed + i));
  for (std::size_t i = 0; i < payload.size(); ++i) payload[i] = std::byte(static_cast<unsigned char>(r.extra * 3 + i));
  std::vector<std::byte> message(header);
  message.insert(message.end(), payload.begin(), payload.end());
  job.honest_messages.insert(message);
  const std::uint64_t sequence = job.honest.next_sequence(0);
  const auto w = wire(job.honest.seal(0, Kind::data, header, payload), header, payload);
  if (!(r.flags & kHonestLost)) out.push_back(w);
  if (!job.pre.fec) return out;
  const std::span<const std::byte> pieces[] = {w};
  job.encoder.add(sequence, pieces);
  if (!job.encoder.full()) return out;
  std::vector<std::byte> table, parity;
  job.encoder.finish(table, parity);
  out.push_back(wire(job.honest.seal(0, Kind::parity, table, parity), table, parity));
  return out;
}

void sign(Job& job, Record& r) {
  fuzz::sign(job.insider[r.extra % kRanks], r.bytes);
  job.insider_signed = true;
}

// What the engine would be handed: `from_rank` when it arrived from a rank's address.
std::function<void(const InboundMessage&)> engine(const Job& job, bool from_rank) {
  return [&job, from_rank](const InboundMessage& m) {
    check(m.source == 1 || m.source == 2, "a message from a rank that cannot have sent one");
    check(m.payload_held && m.payload.size() == m.payload_size, "a payload view that does not match its size");
    check(m.header.size() <= datagram::Header::kMaxEngineHeader, "an engine header longer than allowed");
    check(job.pre.authenticate || from_rank, "without authentication, a message from an address that is no rank's");
    std::vector<std::byte> message(m.header.begin(), m.header.end());
    message.insert(message.end(), m.payload.begin(), m.payload.end());
    check(job.insider_signed || !job.pre.authenticate || job.honest_messages.count(message), "a forged message passed");
  };
}

// Feeds one buffer to the receive path and checks what came out.
void feed(Job& job, const std::vector<std::byte>& buffer, std::size_t segment, bool truncated, int origin_index) {
  const auto before = job.counters.messages_received + job.counters.rejected();
  const auto on_message = engine(job, origin_index == 1 || origin_index == 2);
  job.inbound->listen(job.pre.listening ? &on_message : nullptr);
  job.path->deliver(buffer, segment, truncated, job.address[origin_index], Clock::now(), *job.inbound);
  job.inbound->listen(nullptr);
  const auto after = job.counters.messages_received + job.counters.rejected();
  const std::size_t segments = truncated ? 1 : udp::GroSegments(buffer, segment).size();
  check(after - before >= segments && after - before <= 2 * segments, "a segment neither accepted nor rejected");
}

void run_one(const std::uint8_t* data, std::size_t size) {
  if (size < Preamble::kSize) return;
  const Preamble pre(data);
  std::vector<Record> records = parse(data, size);
  if (pre.engines) return run_engines(pre, records);
  Job job(pre);
  for (std::size_t i = 0; i < records.size(); ++i) {
    Record& r = records[i];
    if (r.flags & kHonestFirst)
      for (const auto& d : honest_datagrams(job, r)) feed(job, d, 0, false, 1);
    if (r.flags & kSign) sign(job, r);
    const int origin = (r.flags & kOriginMask) == 0 ? 1 : (r.flags & kOriginMask) == 1 ? 2 : (r.flags & kOriginMask) == 2 ? kRanks : 0;
    std::size_t segment = 0;
    const bool truncated = (r.flags & kTruncated) != 0;
    const auto buffer = fuzz::gro_buffer(records, i, segment, udp::ReceivePath::kBufferBytes);
    feed(job, buffer, segment, truncated, origin);
  }
  // What was kept while the engine was not listening: only what came from ranks was kept.
  const auto on_message = engine(job, true);
  job.inbound->listen(&on_message);
  job.inbound->deliver_kept();
  job.inbound->listen(nullptr);
}

// Seed corpus: FUZZ_WRITE_SEEDS=<dir> ./datagram_fuzz writes it and exits.
struct Seed {
  std::vector<std::uint8_t> bytes;
  explicit Seed(std::uint8_t mode) : bytes{mode, 7, 0} {}
  Seed& record(std::uint8_t flags, std::uint8_t extra, std::vector<std::uint8_t> body = {}) {
    bytes.push_back(static_cast<std::uint8_t>(body.size() & 0xff));
    bytes.push_back(static_cast<std::uint8_t>(body.size() >> 8));
    bytes.push_back(flags);
    bytes.push_back(extra);
    bytes.insert(bytes.end(), body.begin(), body.end());
    return *this;
  }
};

void write_seeds(const char* dir) {
  const std::vector<std::uint8_t> garbage(90, 0x41);
  std::vector<std::uint8_t> magic = {0x4f, 0x52, 0x44, 0x47, 2, 1, 8, 0};
  magic.resize(120, 0x33);
  std::vector<std::pair<std::string, Seed>> seeds;
  seeds.emplace_back("honest_clean", Seed(0).record(kHonestFirst, 10).record(kHonestFirst, 100).record(kHonestFirst | kHonestControl, 1));
  seeds.emplace_back("honest_fec_lossy", Seed(2).record(kHonestFirst, 20).record(kHonestFirst | kHonestLost, 21).record(kHonestFirst, 22).record(kHonestFirst, 23));
  seeds.emplace_back("signed_insider", Seed(0).record(kSign, 1, magic).record(kSign | 1, 2, magic));
  seeds.emplace_back("gro_joined", Seed(0).record(kJoin | kSign, 1, magic).record(kJoin, 0, magic).record(0, 0, magic));
  seeds.emplace_back("stranger_truncated", Seed(0).record(2, 0, garbage).record(kTruncated, 0, magic).record(3, 0, magic));
  seeds.emplace_back("auth_off_kept", Seed(1 | 4).record(kHonestFirst, 30).record(kSign, 1, magic).record(2 | kSign, 1, magic));
  seeds.emplace_back("big_datagrams", Seed(8).record(kHonestFirst, 255).record(kHonestFirst | kHonestControl, 2));
  // The engines (preamble bit 4): template engine headers [kind-1, flags, source, comm, epoch
  // delta + 2, total, chunk, offset, length, stamps, payload nudge] then payload bytes.
  auto engine_header = [](int kind, int epoch_delta, int chunk) {
    std::vector<std::uint8_t> t = {static_cast<std::uint8_t>(kind - 1), 0, 0, 0, static_cast<std::uint8_t>(epoch_delta + 2), 0,
                                   static_cast<std::uint8_t>(chunk), 0, 0, 1, 1, 0};
    t.resize(12 + 64, 0x3c);
    return t;
  };
  const std::uint8_t engines = 16, bounded = 32, hadamard = 64;
  seeds.emplace_back("engines_exact_strangers", Seed(engines).record(2, 0, garbage).record(kEngineHeader, 0, engine_header(1, 0, 0))
                                                    .record(kEngineHeader | 3, 0, engine_header(2, 0, 1)));
  seeds.emplace_back("engines_exact_insider", Seed(engines).record(kEngineHeader | kSign, 0, engine_header(1, 0, 0))
                                                  .record(kEngineHeader | kSign, 0, engine_header(2, 0, 0))
                                                  .record(kEngineHeader | kSign, 0, engine_header(1, 1, 1))
                                                  .record(kEngineHeader | kSign, 0, engine_header(3, 0, 0)));
  seeds.emplace_back("engines_bounded_insider", Seed(engines | bounded).record(kEngineHeader | kSign, 0, engine_header(4, 0, 0))
                                                    .record(kEngineHeader | kSign, 0, engine_header(1, -1, 0))
                                                    .record(kEngineHeader | kSign, 0, engine_header(2, 0, 2))
                                                    .record(kEngineHeader | kSign, 0, engine_header(5, 0, 0)));
  seeds.emplace_back("engines_big_hadamard", Seed(engines | bounded | hadamard | 8).record(kEngineHeader | kSign, 0, engine_header(2, 0, 0))
                                                 .record(kSign, 1, magic).record(kEngineHeader, 0, engine_header(1, 0, 0)));
  seeds.emplace_back("engines_auth_off", Seed(engines | 1).record(kEngineHeader, 0, engine_header(1, 0, 0)).record(kEngineHeader | 2, 0, engine_header(2, 0, 0)));
  for (const auto& [name, seed] : seeds) {
    const std::string path = std::string(dir) + "/" + name;
    std::ofstream(path, std::ios::binary).write(reinterpret_cast<const char*>(seed.bytes.data()), static_cast<std::streamsize>(seed.bytes.size()));
    std::printf("%s (%zu bytes)\n", path.c_str(), seed.bytes.size());
  }
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  if (const char* dir = std::getenv("FUZZ_WRITE_SEEDS")) {
    write_seeds(dir);
    std::exit(0);
  }
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  run_one(data, size);
  return 0;
}
