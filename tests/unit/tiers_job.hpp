// An in-process job of the three-stage call (hierarchy/host_tiers.hpp) for the unit tests: ranks
// as threads, "hosts" that share a real POSIX shared-memory segment, each slice's exchange a real
// engine over the in-process transport (an exact one, and where a network is given a lossy one
// for its bounded calls). The calls are float32 allreduces, or 16-bit ones (`format`): each rank's
// values then rounded to the format, its results widened back to float32 (exactly).
#pragma once

#include <functional>
#include <memory>
#include <numeric>
#include <string>
#include <thread>
#include <vector>

#include "optireduce/elements/convert.hpp"
#include "optireduce/engine/engine/engine.hpp"
#include "optireduce/engine/hierarchy/placement.hpp"
#include "inproc_transport.hpp"

namespace optireduce::testing {

// Deterministic small integers, different per rank, call and index.
inline float tiers_value(int rank, int call, std::uint64_t i) {
  return static_cast<float>(static_cast<int>((i * 7 + static_cast<std::uint64_t>(rank) * 13 + static_cast<std::uint64_t>(call) * 5) % 17) - 8);
}

inline std::vector<float> tiers_exact_sum(int ranks, int call, std::uint64_t count) {
  std::vector<float> sum(count, 0.0f);
  for (int r = 0; r < ranks; ++r)
    for (std::uint64_t i = 0; i < count; ++i) sum[i] += tiers_value(r, call, i);
  return sum;
}

struct TiersJob {
  std::vector<int> counts;  // ranks per host
  std::vector<std::string> names;  // or, where given, the host of each rank
  int calls = 3;
  std::uint64_t count = 10000;
  EngineOptions options;
  // The lossy network of a slice's bounded calls (null: none, exact calls only; the default:
  // `network` for every slice).
  const InProcNetwork* network = nullptr;
  std::function<const InProcNetwork*(int slice)> network_of;
  bool bounded = false;           // the calls allow deadlines
  bool exact_over_mpi = false;    // the slices' engines have no exact transport: the bootstrap's
  std::function<std::uint64_t(int call)> count_of;      // null: `count` in every call
  // Where given, every call is a reduce-scatter of these blocks (one per rank; `count` and
  // count_of unused), and each result is the rank's block.
  std::function<std::vector<std::uint64_t>(int call)> blocks_of;
  ElementFormat format = ElementFormat::float32;         // of every call
  std::function<float(int rank, int call, std::uint64_t i)> value_of;  // null: tiers_value
  std::function<void(int rank, int call, const Engine&)> before_call;
  std::function<void(int rank)> left_early;  // a rank whose engine or tiers could not be made
};

struct TiersOutcome {
  std::vector<std::vector<float>> results;  // [call * ranks + rank]
  std::vector<CallStats> stats;             // likewise
  bool all_tiered = true;                   // every rank's engine took the three stages
};

// Every call in place on every rank (after a failure too: those fail at once).
inline TiersOutcome run_tiers_job(const TiersJob& job) {
  const Placement placement = job.names.empty() ? placement_from_counts(job.counts) : placement_from_names(job.names);
  const int ranks = placement.ranks(), calls = job.calls;
  auto fabric = std::make_shared<InProcFabric>(ranks);
  TiersOutcome out;
  out.results.assign(static_cast<std::size_t>(calls * ranks), {});
  out.stats.assign(static_cast<std::size_t>(calls * ranks), {});
  std::vector<std::uint8_t> tiered(static_cast<std::size_t>(ranks), 0);
  std::vector<std::thread> threads;
  for (int r = 0; r < ranks; ++r)
    threads.emplace_back([&, r] {
      Status status;
      auto engine = Engine::create(r, ranks, std::make_unique<InProcTransport>(fabric, r), nullptr,
                                   std::make_unique<InProcBootstrap>(fabric, r), job.options, status);
      if (!engine) {
        if (job.left_early) job.left_early(r);
        return;
      }
      auto make = [&](int slice, int sub_rank, int sub_ranks, std::unique_ptr<Bootstrap> view, Status& st) {
        const auto& slice_fabric = static_cast<InProcBootstrap*>(view.get())->fabric();
        const InProcNetwork* network = job.network_of ? job.network_of(slice) : job.network;
        std::unique_ptr<Transport> lossy, exact;
        if (network) lossy = std::make_unique<InProcTransport>(slice_fabric->sub_fabric(2, 0, sub_ranks), sub_rank, *network);
        if (!job.exact_over_mpi) exact = std::make_unique<InProcTransport>(slice_fabric->sub_fabric(1, 0, sub_ranks), sub_rank);
        return Engine::create(sub_rank, sub_ranks, std::move(exact), std::move(lossy), std::move(view), job.options, st);
      };
      if (!engine->enable_hierarchy(placement, make).ok() || !engine->tiers()) {
        if (job.left_early) job.left_early(r);
        return;
      }
      tiered[static_cast<std::size_t>(r)] = 1;
      for (int c = 0; c < calls; ++c) {
        const std::vector<std::uint64_t> blocks = job.blocks_of ? job.blocks_of(c) : std::vector<std::uint64_t>{};
        const std::uint64_t count = job.blocks_of ? std::accumulate(blocks.begin(), blocks.end(), std::uint64_t{0})
                                    : job.count_of ? job.count_of(c)
                                                   : job.count;
        std::vector<float> values(count);
        for (std::uint64_t i = 0; i < count; ++i) values[i] = job.value_of ? job.value_of(r, c, i) : tiers_value(r, c, i);
        const bool wide = job.format == ElementFormat::float32;
        std::vector<std::uint16_t> half(wide ? 0 : count);
        if (!wide) narrow(job.format, values.data(), half.data(), count);
        void* buffer = wide ? static_cast<void*>(values.data()) : half.data();
        if (job.before_call) job.before_call(r, c, *engine);
        const std::size_t at = static_cast<std::size_t>(c * ranks + r);
        if (job.blocks_of) {
          // In place on odd calls: the block at the buffer's start.
          const std::uint64_t mine = blocks[static_cast<std::size_t>(r)];
          std::vector<std::uint16_t> half_block(wide ? 0 : mine);
          std::vector<float> block(mine, -1.0f);
          void* output = c % 2 ? buffer : wide ? static_cast<void*>(block.data()) : half_block.data();
          out.stats[at] = engine->reduce_scatter(buffer, output, blocks, job.format, job.bounded);
          if (!wide) widen(job.format, c % 2 ? half.data() : half_block.data(), block.data(), mine);
          else if (c % 2) std::copy(values.begin(), values.begin() + static_cast<std::ptrdiff_t>(mine), block.begin());
          out.results[at] = std::move(block);
          continue;
        }
        out.stats[at] = engine->allreduce(buffer, buffer, count, job.format, job.bounded);
        if (!wide) widen(job.format, half.data(), values.data(), count);
        out.results[at] = std::move(values);
      }
    });
  for (auto& t : threads) t.join();
  for (auto t : tiered) out.all_tiered = out.all_tiered && t;
  return out;
}

}  // namespace optireduce::testing
