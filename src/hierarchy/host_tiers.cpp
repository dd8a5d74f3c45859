#include "optireduce/engine/hierarchy/host_tiers.hpp"

#include <algorithm>
#include <cstring>

#include "optireduce/engine/clock_us.hpp"
#include "optireduce/engine/engine/engine.hpp"
#include "optireduce/engine/hierarchy/scatter_map.hpp"
#include "optireduce/engine/hierarchy/host_sum.hpp"

namespace optireduce {
namespace {

// The smallest slot a host's segment gets; it grows by doubling past it.
constexpr std::size_t kFirstSlotBytes = std::size_t{1} << 20;

// Collective over `parent`: whether every rank's flag is set.
bool all_ranks(Bootstrap& parent, bool mine) {
  const std::byte flag{static_cast<unsigned char>(mine ? 1 : 0)};
  const auto all = parent.allgather({&flag, 1});
  return std::all_of(all.begin(), all.end(), [](const auto& b) { return b.size() == 1 && b[0] == std::byte{1}; });
}

}  // namespace

HostTiers::HostTiers(int rank, Placement placement, SliceMap slices, std::uint64_t comm_id, std::chrono::milliseconds watchdog,
                     Clock::duration exchange_grace)
    : rank_(rank),
      placement_(std::move(placement)),
      slices_(std::move(slices)),
      comm_id_(comm_id),
      watchdog_(watchdog),
      exchange_grace_(exchange_grace),
      local_index_(placement_.local_index(rank)),
      local_ranks_(placement_.ranks_on(placement_.host_of_rank[static_cast<std::size_t>(rank)])),
      my_slices_(slices_.slices_of(rank)),
      scatter_flat_reason_(reduce_scatter_flat_reason(placement_)) {}

HostTiers::~HostTiers() = default;

std::unique_ptr<HostTiers> HostTiers::create(int rank, const Placement& placement, std::uint64_t comm_id, Bootstrap& parent,
                                             const MakeEngine& make, std::chrono::milliseconds watchdog,
                                             Clock::duration exchange_grace, Status& status) {
  auto tiers =
      std::unique_ptr<HostTiers>(new HostTiers(rank, placement, map_slices(placement), comm_id, watchdog, exchange_grace));
  const int host = placement.host_of_rank[static_cast<std::size_t>(rank)];
  // Every split first (collectives over every rank, in slice order), then the engines of this
  // rank's slices in buffer order (each collective over its holders; a holder of several goes
  // through them in the order every other holder does, so none waits in a cycle).
  bool ok = true;
  std::vector<std::unique_ptr<Bootstrap>> views;
  for (int s = 0; s < static_cast<int>(tiers->slices_.slices.size()); ++s) {
    const auto& holders = tiers->slices_.slices[static_cast<std::size_t>(s)].ranks;
    const bool mine = std::find(holders.begin(), holders.end(), rank) != holders.end();
    std::unique_ptr<Bootstrap> view;
    ok = parent.split(mine ? s : -1, host, view) && ok;
    if (mine) {
      ok = ok && view != nullptr;
      views.push_back(std::move(view));
    }
  }
  if (!all_ranks(parent, ok)) {
    status = Unavailable("the job's bootstrap could not make a group for each slice");
    return nullptr;
  }
  Status made;
  for (std::size_t i = 0; i < tiers->my_slices_.size(); ++i) {
    Status one;
    const int s = tiers->my_slices_[i];
    auto engine = make(s, host, placement.hosts(), std::move(views[i]), one);
    if (!engine && made.ok()) made = one;
    if (engine) engine->flag_failures_over_bootstrap();  // every holder's, or the slice fails below
    tiers->engines_.push_back(std::move(engine));
  }
  if (!all_ranks(parent, made.ok())) {
    status = made.ok() ? PeerError("another rank could not make the engine of one of its slices")
                       : PeerError("the engine of a slice: " + made.text());
    return nullptr;
  }
  return tiers;
}

std::uint64_t HostTiers::segment_id(std::uint64_t comm_id, unsigned generation) {
  return comm_id + 0x9e3779b97f4a7c15ULL * generation;
}

std::string HostTiers::segment_name(std::uint64_t comm_id, const std::string& host, unsigned generation) {
  return HostSegment::name_of(segment_id(comm_id, generation), host);
}

Status HostTiers::fit_segment(std::size_t bytes, Clock::time_point deadline) {
  if (segment_ && segment_->slot_bytes() >= bytes) return {};
  std::size_t slot = std::max(kFirstSlotBytes, segment_ ? 2 * segment_->slot_bytes() : std::size_t{0});
  while (slot < bytes) slot *= 2;
  if (stages_) shm_bytes_before_ += stages_->shared_memory_bytes();
  stages_.reset();
  segment_.reset();
  // A name of its own for each size: the last segment's may still be there on a slow rank.
  const std::uint64_t id = segment_id(comm_id_, ++segment_generation_);
  const std::string& host = placement_.host_names[static_cast<std::size_t>(placement_.host_of_rank[static_cast<std::size_t>(rank_)])];
  Status status;
  segment_ = HostSegment::attach(id, host, local_index_, local_ranks_, slot, deadline, status);
  if (!segment_) return status;
  stages_ = std::make_unique<HostStages>(*segment_, local_index_);
  return {};
}

HostTiers::HostSums HostTiers::reduce_in_host(const void* input, void* whole, std::size_t elements, ElementRange mine,
                                               ElementFormat format, Clock::time_point deadline) {
  // This rank's range summed over its host, failed on every local rank alike where it failed on
  // one (its verdict). A host of one rank has nothing to sum: its slices are exchanged in `whole`.
  const std::size_t size = element_bytes(format);
  HostSums sums{static_cast<std::byte*>(whole), 0, {}};
  if (local_ranks_ == 1) {
    if (input != whole) std::memcpy(whole, input, elements * size);
    return sums;
  }
  reduced_.resize(std::max<std::size_t>(mine.size(), 1) * size);
  sums.work = reduced_.data(), sums.begin = mine.begin;
  sums.failure = fit_segment(elements * size, deadline);
  // The sum goes straight to this rank's range of the host's result area, where the exchanges
  // then run and the all-gather finds it; after a failure the exchanges (which fail too) run in
  // reduced_, leaving the result area to local ranks that may still copy the last call's.
  if (sums.failure.ok())
    sums.failure = stages_->reduce_scatter(input, elements, mine, stages_->result_range(mine, format), deadline, format);
  if (sums.failure.ok()) sums.work = static_cast<std::byte*>(stages_->result_range(mine, format));
  return sums;
}

Status HostTiers::exchange_slices(const HostSums& sums, std::size_t elements, ElementFormat format, CallStats& stats,
                                  const Exchange& exchange) {
  // Each of this rank's slices across hosts, in buffer order, run even after a failure: failed
  // then, so that the slice's holders on every other host fail the call too.
  const std::size_t size = element_bytes(format);
  Status failure = sums.failure;
  const std::uint64_t sent_before = transport_counters().bytes_sent;
  bool first = true;
  for (std::size_t i = 0; i < my_slices_.size(); ++i) {
    const ElementRange r = slices_.elements_of(my_slices_[i], elements, host_granule(format));
    if (r.size() == 0) continue;  // every holder sees it empty alike
    if (stages_) stages_->mark_progress();
    engines_[i]->note_list_left(list_left_);
    const CallStats one = exchange(*engines_[i], sums.work + (r.begin - sums.begin) * size, r, failure);
    list_left_ = std::max(list_left_, engines_[i]->list_left());
    if (!one.ok() && failure.ok()) failure = one.status;
    stats.dropped_entries += one.dropped_entries;
    stats.filled_entries += one.filled_entries;
    stats.cut = stats.cut || one.cut;
    stats.transformed = stats.transformed || one.transformed;
    if (first) {
      // The report's kind, transport and budgets: those of this rank's first exchange.
      stats.kind = one.kind, stats.transport = one.transport, stats.deadline_us = one.deadline_us;
      stats.fill_agreed = one.fill_agreed;
      first = false;
    } else {
      stats.fill_agreed = stats.fill_agreed && one.fill_agreed;
    }
    for (std::size_t p = 0; p < kTarPhases; ++p) stats.phase_us[p] += one.phase_us[p];
  }
  stats.stages.network_bytes = transport_counters().bytes_sent - sent_before;
  return failure;
}

CallStats HostTiers::allreduce(const void* input, void* output, std::uint64_t count, ElementFormat format, bool bounded,
                               CallStats stats, Clock::time_point start) {
  const auto deadline = start + watchdog_;
  const auto elements = static_cast<std::size_t>(count);
  const ElementRange mine = local_range(local_index_, local_ranks_, elements, host_granule(format));
  stats.stages.hierarchical = true;
  const std::uint64_t shm_before = shared_memory_bytes();
  // Stage 1: this rank's range summed over its host (a host of one rank: in the output).
  const HostSums sums = reduce_in_host(input, output, elements, mine, format, deadline);
  const double reduced_at = us_since(start);
  stats.stages.host_reduce_us = reduced_at;
  // Stage 2: each slice's allreduce among its holders.
  Status failure = exchange_slices(sums, elements, format, stats, [&](Engine& engine, std::byte* at, ElementRange r, const Status& failed) {
    return engine.allreduce(at, at, r.size(), format, bounded, failed);
  });
  const double exchanged_at = us_since(start);
  stats.stages.exchange_us = exchanged_at - reduced_at;
  // Stage 3: every host's sum to every local rank, and every local rank's failure to all.
  if (local_ranks_ > 1 && stages_) {
    // The call's dropped entries: every slice's, the same count on every rank.
    const Status gathered = stages_->all_gather(sums.work, mine, output, elements, deadline, !failure.ok(),
                                                &stats.dropped_entries, exchange_grace_, format);
    if (failure.ok()) failure = gathered;
  }
  finish_stats(stats, shm_before, exchanged_at, start, failure);
  return stats;
}

void HostTiers::finish_stats(CallStats& stats, std::uint64_t shm_before, double exchanged_at, Clock::time_point start,
                             const Status& failure) const {
  stats.stages.shared_memory_bytes = shared_memory_bytes() - shm_before;
  stats.latency_us = us_since(start);
  stats.stages.host_gather_us = stats.latency_us - exchanged_at;
  stats.status = failure;
}

TransportCounters HostTiers::transport_counters() const {
  TransportCounters sum;
  for (const auto& e : engines_)
    if (e) sum += e->transport_counters();
  return sum;
}

std::size_t HostTiers::buffer_bytes() const {
  std::size_t bytes = reduced_.capacity();
  for (const auto& e : engines_)
    if (e) bytes += e->buffer_bytes();
  return bytes;
}

}  // namespace optireduce
