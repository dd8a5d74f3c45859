#include "inproc_datagram.hpp"

#include <arpa/inet.h>

#include <algorithm>
#include <cstring>
#include <functional>

#include "fuzz_input.hpp"
#include "optireduce/udp/segmentation.hpp"

namespace optireduce::fuzz {
namespace {

// The flow window never closes here: the wire holds everything, and nothing is ever lost.
constexpr std::size_t kWindowBytes = std::size_t{1} << 30;

std::vector<std::byte> joined(std::span<const std::byte> header, std::span<const std::byte> payload) {
  std::vector<std::byte> m(header.begin(), header.end());
  m.insert(m.end(), payload.begin(), payload.end());
  return m;
}

}  // namespace

sockaddr_in loop_address(int index) {
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(0x7f000001u + static_cast<std::uint32_t>(index == kEngineRanks ? 1 : 0));
  a.sin_port = htons(static_cast<std::uint16_t>(5000 + index));
  return a;
}

void Loop::post(int to, LoopBuffer buffer) {
  {
    std::lock_guard lock(mutex_);
    inbox_[to].push_back(std::move(buffer));
  }
  changed_.notify_all();
}

std::deque<LoopBuffer> Loop::take(int rank, Clock::time_point deadline) {
  std::unique_lock lock(mutex_);
  changed_.wait_until(lock, deadline, [&] { return !inbox_[rank].empty(); });
  std::deque<LoopBuffer> out;
  out.swap(inbox_[rank]);
  return out;
}

std::vector<std::vector<std::byte>> Loop::allgather(int rank, std::span<const std::byte> mine) {
  std::unique_lock lock(mutex_);
  const unsigned generation = generation_;
  slots_[rank].assign(mine.begin(), mine.end());
  filled_[rank] = true;
  auto complete = [&] { return filled_[0] && filled_[1]; };
  if (!complete()) changed_.wait(lock, [&] { return generation_ != generation || complete() || left_[1 - rank]; });
  if (generation_ == generation && complete()) {
    result_.assign(slots_, slots_ + kEngineRanks);
    filled_[0] = filled_[1] = false;
    ++generation_;
    changed_.notify_all();
  } else if (generation_ == generation) {
    // The other rank has left: it will never answer.
    filled_[rank] = false;
    std::vector<std::vector<std::byte>> alone(kEngineRanks);
    alone[static_cast<std::size_t>(rank)] = slots_[rank];
    return alone;
  }
  return result_;
}

void Loop::leave(int rank) {
  {
    std::lock_guard lock(mutex_);
    left_[rank] = true;
  }
  changed_.notify_all();
}

void Loop::note_honest(std::span<const std::byte> header, std::span<const std::byte> payload) {
  std::lock_guard lock(mutex_);
  honest_.insert(joined(header, payload));
}

bool Loop::honest(std::span<const std::byte> header, std::span<const std::byte> payload) const {
  std::lock_guard lock(mutex_);
  return honest_.count(joined(header, payload)) != 0;
}

LoopTransport::LoopTransport(std::shared_ptr<Loop> loop, int rank, const LoopSettings& settings,
                             datagram::Authenticator* auth)
    : loop_(std::move(loop)),
      rank_(rank),
      settings_(settings),
      sealer_(auth, rank, kEngineRanks),
      handshake_(rank, kEngineRanks),
      windows_(kEngineRanks, datagram::FlowWindow(kWindowBytes)),
      dispatch_(rank, kEngineRanks, auth, 0, settings.max_datagram),
      path_(dispatch_, {loop_address(0), loop_address(1)}, counters_),
      inbound_(handshake_, windows_, *this) {}

bool LoopTransport::last_sent(WireHeader& out) const { return !last_header_.empty() && decode(last_header_, out); }

TransportTraits LoopTransport::traits() const {
  TransportTraits t;
  t.reliable = t.ordered = !settings_.bounded;
  t.can_abandon_sends = true;
  t.max_message_bytes = settings_.max_datagram - datagram::Header::kSize;
  return t;
}

Status LoopTransport::send(int peer, Lane, std::span<const std::byte> header, std::span<const std::byte> payload) {
  OR_CHECK(peer == 1 - rank_, invalid, "loop: send to rank " + std::to_string(peer));
  OR_CHECK(header.size() + payload.size() <= traits().max_message_bytes, invalid, "loop: message too large");
  if (rank_ == 1) loop_->note_honest(header, payload);
  if (rank_ == 0) last_header_.assign(header.begin(), header.end());
  ++counters_.messages_sent;
  loop_->post(peer, {wire(sealer_.seal(peer, datagram::Kind::data, header, payload), header, payload), 0, false, rank_});
  return {};
}

void LoopTransport::reply(int peer, datagram::Kind kind, std::span<const std::byte> body) {
  check(peer == 1 - rank_, "an answer to a rank outside the job or to itself");
  check(kind == datagram::Kind::hello || kind == datagram::Kind::pong, "an answer that is neither hello nor pong");
  loop_->post(peer, {wire(sealer_.seal(peer, kind, {}, body), {}, body), 0, false, rank_});
}

void LoopTransport::receive(const LoopBuffer& b) {
  const auto before = counters_.messages_received + counters_.rejected();
  path_.deliver(b.bytes, b.segment, b.truncated, loop_address(b.from), Clock::now(), inbound_);
  const auto after = counters_.messages_received + counters_.rejected();
  const std::size_t segments = b.truncated ? 1 : udp::GroSegments(b.bytes, b.segment).size();
  check(after - before >= segments && after - before <= 2 * segments, "a segment neither accepted nor rejected");
}

Status LoopTransport::poll(Clock::time_point deadline, const std::function<void(const InboundMessage&)>& on_message) {
  // What the engine is handed: from the other rank, a view of what arrived, and (unless the
  // fuzzer may forge) byte for byte what honest rank 1 sent.
  const std::function<void(const InboundMessage&)> checked = [&](const InboundMessage& m) {
    check(m.source == 1 - rank_, "a message from a rank that cannot have sent one");
    check(m.payload_held && m.payload.size() == m.payload_size, "a payload view that does not match its size");
    check(m.header.size() <= datagram::Header::kMaxEngineHeader, "an engine header longer than allowed");
    if (rank_ == 0 && !loop_->honest(m.header, m.payload)) foreign_delivered_ = true;
    on_message(m);
  };
  inbound_.listen(&checked);
  const std::size_t before = inbound_.delivered();
  inbound_.deliver_kept();
  for (;;) {
    const auto injected = next_injected_ ? next_injected_() : std::nullopt;
    if (injected) receive(*injected);
    for (const LoopBuffer& b : loop_->take(rank_, injected ? Clock::time_point::min() : deadline)) receive(b);
    if (inbound_.delivered() > before || Clock::now() >= deadline) break;
  }
  inbound_.listen(nullptr);
  return inbound_.delivered() > before ? Status::Ok() : Timeout("loop: nothing arrived");
}

bool LoopBootstrap::allreduce_sum(const float* input, float* output, std::uint64_t count) {
  const std::size_t bytes = count * sizeof(float);
  const auto all = loop_->allgather(rank_, {reinterpret_cast<const std::byte*>(input), bytes});
  if (std::any_of(all.begin(), all.end(), [&](const auto& blob) { return blob.size() != bytes; })) return false;
  // Rank by rank over the whole buffer (input may be output: every blob is a copy by now).
  std::fill(output, output + count, 0.0f);
  std::vector<float> theirs(count);
  for (const auto& blob : all) {
    if (bytes) std::memcpy(theirs.data(), blob.data(), bytes);
    std::transform(output, output + count, theirs.begin(), output, std::plus<float>());
  }
  return true;
}

}  // namespace optireduce::fuzz
