// The engine over the in-process transport: N ranks as threads, real TAR schedule, real header
// validation.
#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <thread>

#include "optireduce/engine/engine/engine.hpp"
#include "inproc_transport.hpp"
#include "owner_order_sum.hpp"
#include "optireduce/engine/tar/wire_header.hpp"

namespace optireduce {
namespace {

using testing::InProcBootstrap;
using testing::InProcFabric;
using testing::InProcTransport;

using Job = testing::InProcJob;

Job make_job(int ranks, std::uint32_t chunk_elems) {
  EngineOptions options;
  options.chunk_elems = chunk_elems;
  options.timeout = std::chrono::milliseconds(10000);
  return testing::start_inproc_job(ranks, options);
}

std::vector<float> input_of(int rank, std::uint64_t count, bool integers) {
  std::vector<float> v(count);
  std::mt19937 rng(1234 + rank);
  std::uniform_real_distribution<float> real(-1.0f, 1.0f);
  for (std::uint64_t i = 0; i < count; ++i)
    v[i] = integers ? static_cast<float>((i * 7 + static_cast<std::uint64_t>(rank) * 13) % 1000) : real(rng);
  return v;
}

// What the engine promises: each shard's owner sums in one fixed order (its own contribution,
// then rank-1, rank-2, ...: tar/scatter_reduce.hpp), so even non-integer data matches bitwise.
std::vector<float> expected_sum(int ranks, std::uint64_t count, bool integers) {
  std::vector<std::vector<float>> inputs;
  for (int r = 0; r < ranks; ++r) inputs.push_back(input_of(r, count, integers));
  return sum_in_owners_order(ranks, count, [&](int rank, std::uint64_t i) { return inputs[rank][i]; });
}

// Runs one allreduce on every rank; returns each rank's output.
std::vector<std::vector<float>> run(Job& job, std::uint64_t count, bool in_place, bool integers,
                                    std::vector<CallStats>* stats = nullptr) {
  const int ranks = static_cast<int>(job.engines.size());
  std::vector<std::vector<float>> out(ranks);
  std::vector<CallStats> st(ranks);
  std::vector<std::thread> threads;
  for (int r = 0; r < ranks; ++r)
    threads.emplace_back([&, r] {
      auto in = input_of(r, count, integers);
      if (in_place) {
        st[r] = job.engines[r]->allreduce_sum(in.data(), in.data(), count);
        out[r] = std::move(in);
      } else {
        out[r].assign(count, -7.0f);
        st[r] = job.engines[r]->allreduce_sum(in.data(), out[r].data(), count);
      }
    });
  for (auto& t : threads) t.join();
  if (stats) *stats = st;
  return out;
}

class EngineSizes : public ::testing::TestWithParam<int> {};

TEST_P(EngineSizes, ExactSumForAwkwardCounts) {
  const int ranks = GetParam();
  Job job = make_job(ranks, 64);  // small chunks: many chunks per shard, ragged last ones
  for (auto* e : {&job.engines})
    for (auto& engine : *e) ASSERT_NE(engine, nullptr);
  const std::uint64_t counts[] = {0, 1, 2, static_cast<std::uint64_t>(ranks - 1), 7, 1009, 65537};
  for (bool in_place : {false, true}) {
    for (std::uint64_t count : counts) {
      for (bool integers : {true, false}) {
        std::vector<CallStats> stats;
        auto out = run(job, count, in_place, integers, &stats);
        const auto want = expected_sum(ranks, count, integers);
        for (int r = 0; r < ranks; ++r) {
          EXPECT_TRUE(stats[r].ok()) << stats[r].status.text();
          EXPECT_EQ(stats[r].dropped_entries, 0u);
          ASSERT_EQ(out[r].size(), count);
          EXPECT_TRUE(count == 0 || std::memcmp(out[r].data(), want.data(), count * sizeof(float)) == 0)
              << "rank " << r << " of " << ranks << ", count " << count << (in_place ? " in place" : "");
        }
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Ranks, EngineSizes, ::testing::Values(1, 2, 3, 4, 5));

TEST(Engine, BuffersAreReusedAndBoundedByTwiceTheLargestCall) {
  Job job = make_job(4, 1024);
  run(job, 100000, false, true);
  const std::size_t after_large = job.engines[0]->buffer_bytes();
  for (int i = 0; i < 20; ++i) run(job, 1000 + i, true, true);
  EXPECT_EQ(job.engines[0]->buffer_bytes(), after_large) << "smaller calls must reuse the buffers";
  EXPECT_LE(after_large, 2 * job.engines[0]->largest_call_bytes() + 4096);
}

TEST(Engine, RejectsForgedAndMisplacedMessagesWithoutHarm) {
  Job job = make_job(3, 128);
  run(job, 1000, false, true);  // epoch 1 done
  Engine& victim = *job.engines[0];
  auto forged = [&](auto mutate, std::size_t payload_floats) {
    WireHeader h;
    h.kind = MessageKind::scatter_chunk;
    h.source = 1;
    h.comm_id = victim.comm_id();
    h.epoch = 2;
    h.total = 1000;
    h.offset = 0;
    h.length = 128;
    mutate(h);
    std::array<std::byte, WireHeader::kEncodedSize> bytes;
    encode(h, bytes);
    job.fabric->deliver(0, {1, {bytes.begin(), bytes.end()}, std::vector<std::byte>(payload_floats * 4, std::byte{0x7f})});
  };
  forged([](WireHeader& h) { h.comm_id ^= 1; }, 128);     // foreign communicator
  forged([](WireHeader& h) { h.source = 9; }, 128);       // impossible rank
  forged([](WireHeader& h) { h.source = 0; }, 128);       // itself
  forged([](WireHeader& h) { h.epoch = 1; }, 128);        // a call that is over
  forged([](WireHeader& h) { h.offset = 5; }, 128);       // not a chunk boundary
  forged([](WireHeader& h) { h.length = 100; }, 100);     // wrong chunk length
  forged([](WireHeader& h) { (void)h; }, 127);            // payload shorter than the header says
  forged([](WireHeader& h) { h.total = 999; }, 128);      // another call's geometry
  job.fabric->deliver(0, {1, std::vector<std::byte>(10, std::byte{1}), {}});  // truncated header
  const auto before = victim.rejects().total();
  auto out = run(job, 1000, false, true);
  const auto want = expected_sum(3, 1000, true);
  for (auto& o : out) EXPECT_EQ(std::memcmp(o.data(), want.data(), 1000 * sizeof(float)), 0);
  const auto& rj = victim.rejects();
  EXPECT_EQ(rj.total() - before, 9u);
  EXPECT_GE(rj.foreign, 3u);
  EXPECT_GE(rj.stale, 1u);
  EXPECT_GE(rj.misplaced, 4u);
  EXPECT_GE(rj.malformed, 1u);
}

TEST(Engine, ManyCallsOfChangingSizeStayExact) {
  Job job = make_job(4, 256);
  for (int i = 0; i < 50; ++i) {
    const std::uint64_t count = 1 + (static_cast<std::uint64_t>(i) * 7919) % 20000;
    auto out = run(job, count, i % 2 == 0, true);
    const auto want = expected_sum(4, count, true);
    for (auto& o : out) ASSERT_EQ(std::memcmp(o.data(), want.data(), count * sizeof(float)), 0) << "call " << i;
  }
}

TEST(Engine, CreationFailsOnEveryRankWhenOneRankHasNoTransport) {
  const int ranks = 3;
  auto fabric = std::make_shared<InProcFabric>(ranks);
  std::vector<std::unique_ptr<Engine>> engines(ranks);
  std::vector<Status> errors(ranks);
  std::vector<std::thread> threads;
  for (int r = 0; r < ranks; ++r)
    threads.emplace_back([&, r] {
      auto transport = r == 1 ? nullptr : std::make_unique<InProcTransport>(fabric, r);
      engines[r] = Engine::create(r, ranks, std::move(transport), nullptr, std::make_unique<InProcBootstrap>(fabric, r), {},
                                  errors[r]);
    });
  for (auto& t : threads) t.join();
  for (int r = 0; r < ranks; ++r) {
    EXPECT_EQ(engines[r], nullptr);
    EXPECT_NE(errors[r].message().find("rank 1"), std::string::npos) << errors[r].text();
  }
}

}  // namespace
}  // namespace optireduce
