// Classification of arriving messages: every field checked before anything changes.
#include <gtest/gtest.h>

#include <array>

#include "optireduce/engine/tar/inbound.hpp"

namespace optireduce {
namespace {

struct Fixture {
  ShardLayout layout{1000, 4, 100};  // shards of 250, chunks of 100 (the last of each shard 50)
  CallView view{1, 4, 0xabcdefull, 7, true, &layout};
  std::array<std::byte, WireHeader::kEncodedSize> bytes{};
  std::vector<std::byte> payload;

  InboundMessage message(WireHeader h, int source, std::size_t payload_floats) {
    encode(h, bytes);
    payload.assign(payload_floats * sizeof(float), std::byte{0});
    InboundMessage m;
    m.source = source;
    m.header = bytes;
    m.payload = payload;
    m.payload_size = payload.size();
    return m;
  }
  static WireHeader scatter_to_rank1() {
    WireHeader h;
    h.kind = MessageKind::scatter_chunk;
    h.source = 2;
    h.comm_id = 0xabcdefull;
    h.epoch = 7;
    h.total = 1000;
    h.offset = 350;  // rank 1's shard starts at 250: its chunk 1
    h.length = 100;
    return h;
  }
};

TEST(Inbound, AChunkOfTheCallInProgressIsNamedWithItsIndex) {
  Fixture f;
  const Inbound in = classify(f.message(Fixture::scatter_to_rank1(), 2, 100), f.view);
  EXPECT_EQ(in.kind, InboundKind::scatter_chunk);
  EXPECT_EQ(in.chunk, 1u);
  WireHeader g = Fixture::scatter_to_rank1();
  g.kind = MessageKind::gather_chunk;
  g.offset = 700;  // rank 2's shard is [500, 750): its chunk 2, 50 long
  g.length = 50;
  const Inbound gathered = classify(f.message(g, 2, 50), f.view);
  EXPECT_EQ(gathered.kind, InboundKind::gather_chunk);
  EXPECT_EQ(gathered.chunk, 2u);
}

TEST(Inbound, EveryFieldThatDoesNotFitIsCaught) {
  Fixture f;
  auto kind_of = [&](auto mutate, int source = 2, std::size_t floats = 100) {
    WireHeader h = Fixture::scatter_to_rank1();
    mutate(h);
    return classify(f.message(h, source, floats), f.view).kind;
  };
  EXPECT_EQ(kind_of([](WireHeader& h) { h.comm_id ^= 1; }), InboundKind::foreign);
  EXPECT_EQ(kind_of([](WireHeader& h) { h.source = 4; }), InboundKind::foreign) << "no such rank";
  EXPECT_EQ(kind_of([](WireHeader& h) { h.source = 1; }), InboundKind::foreign) << "this rank itself";
  EXPECT_EQ(kind_of([](WireHeader&) {}, 3), InboundKind::foreign) << "not the rank the transport saw";
  EXPECT_EQ(kind_of([](WireHeader& h) { h.epoch = 6; }), InboundKind::stale);
  EXPECT_EQ(kind_of([](WireHeader& h) { h.epoch = 8; }), InboundKind::early);
  EXPECT_EQ(kind_of([](WireHeader& h) { h.offset = 351; }), InboundKind::misplaced) << "not a chunk boundary";
  EXPECT_EQ(kind_of([](WireHeader& h) { h.offset = 50; }), InboundKind::misplaced) << "another rank's shard";
  EXPECT_EQ(kind_of([](WireHeader& h) { h.total = 999; }), InboundKind::misplaced) << "another call's geometry";
  EXPECT_EQ(kind_of([](WireHeader&) {}, 2, 99), InboundKind::misplaced) << "payload shorter than the header says";
  EXPECT_EQ(kind_of([](WireHeader& h) { h.length = 60; }, 2, 60), InboundKind::misplaced) << "wrong chunk length";
  std::vector<std::byte> truncated(10);
  InboundMessage m;
  m.source = 2;
  m.header = truncated;
  EXPECT_EQ(classify(m, f.view).kind, InboundKind::malformed);
}

TEST(Inbound, BetweenCallsNothingOfTheLastCallLands) {
  Fixture f;
  f.view.in_call = false;
  EXPECT_EQ(classify(f.message(Fixture::scatter_to_rank1(), 2, 100), f.view).kind, InboundKind::stale);
  WireHeader done = Fixture::scatter_to_rank1();
  done.kind = MessageKind::peer_done;
  done.offset = 0;
  done.length = 0;
  EXPECT_EQ(classify(f.message(done, 2, 0), f.view).kind, InboundKind::ignored);
  f.view.in_call = true;
  EXPECT_EQ(classify(f.message(done, 2, 0), f.view).kind, InboundKind::peer_done);
}

TEST(Inbound, AHeartbeatCountsOnlyForTheCallInProgressAndCarriesNothing) {
  Fixture f;
  WireHeader beat = Fixture::scatter_to_rank1();
  beat.kind = MessageKind::alive;
  beat.offset = 0;
  beat.length = 0;
  EXPECT_EQ(classify(f.message(beat, 2, 0), f.view).kind, InboundKind::alive);
  WireHeader later = beat;
  later.epoch = 8;
  EXPECT_EQ(classify(f.message(later, 2, 0), f.view).kind, InboundKind::ignored) << "never kept for a later call";
  WireHeader earlier = beat;
  earlier.epoch = 6;
  EXPECT_EQ(classify(f.message(earlier, 2, 0), f.view).kind, InboundKind::ignored);
  WireHeader with_length = beat;
  with_length.length = 1;
  EXPECT_EQ(classify(f.message(with_length, 2, 4), f.view).kind, InboundKind::ignored) << "a heartbeat has no payload";
  f.view.in_call = false;
  EXPECT_EQ(classify(f.message(beat, 2, 0), f.view).kind, InboundKind::ignored) << "between calls";
  beat.source = 3;
  f.view.in_call = true;
  EXPECT_EQ(classify(f.message(beat, 2, 0), f.view).kind, InboundKind::foreign) << "claims another sender";
}

TEST(Inbound, AResendRequestCountsOnlyForTheCallInProgress) {
  Fixture f;
  WireHeader h = Fixture::scatter_to_rank1();
  h.kind = MessageKind::resend_request;
  h.offset = 0;
  h.length = 2;  // two chunk indices
  auto kind_of = [&](const WireHeader& w, std::size_t bytes, CallView view) {
    f.payload.assign(bytes, std::byte{0});
    encode(w, f.bytes);
    InboundMessage m;
    m.source = 2;
    m.header = f.bytes;
    m.payload = f.payload;
    m.payload_size = bytes;
    return classify(m, view).kind;
  };
  EXPECT_EQ(kind_of(h, 8, f.view), InboundKind::resend_request);
  EXPECT_EQ(kind_of(h, 12, f.view), InboundKind::misplaced) << "payload and length disagree";
  WireHeader at = h;
  at.offset = 1;
  EXPECT_EQ(kind_of(at, 8, f.view), InboundKind::misplaced) << "a request has no offset";
  WireHeader later = h;
  later.epoch = 8;
  EXPECT_EQ(kind_of(later, 8, f.view), InboundKind::ignored) << "never kept for a later call";
  WireHeader earlier = h;
  earlier.epoch = 6;
  EXPECT_EQ(kind_of(earlier, 8, f.view), InboundKind::ignored);
  CallView between = f.view;
  between.in_call = false;
  EXPECT_EQ(kind_of(h, 8, between), InboundKind::ignored) << "between calls nothing is sent again";
}

}  // namespace
}  // namespace optireduce
