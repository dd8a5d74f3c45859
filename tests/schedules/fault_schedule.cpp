#include "fault_schedule.hpp"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>
#include <sstream>

namespace optireduce::schedules {

std::string shape_text(const PlannedCall& call) {
  const char* format = call.shape.format == ElementFormat::float32 ? "f32" : call.shape.format == ElementFormat::float16 ? "f16" : "bf16";
  std::string text = std::string(call.shape.scatter_only() ? "rs." : "ar.") + format + " ";
  if (!call.shape.scatter_only()) text += std::to_string(call.count);
  for (std::size_t p = 0; p < call.blocks.size(); ++p) text += (p ? "+" : "") + std::to_string(call.blocks[p]);
  return text + (call.bounded ? "b" : "x");
}

FaultSchedule FaultSchedule::draw(std::uint64_t seed) {
  FaultSchedule s;
  s.seed = seed;
  std::mt19937_64 rng(seed * 0x9e3779b97f4a7c15ull + 0x632be59bd9b4e019ull);
  auto uniform = [&](double a, double b) { return std::uniform_real_distribution<double>(a, b)(rng); };
  auto chance = [&](double p) { return uniform(0, 1) < p; };
  auto pick = [&](int a, int b) { return std::uniform_int_distribution<int>(a, b)(rng); };
  // Loss in decades (mostly light, as networks are, often harsh: 0 to 50 %).
  auto loss = [&] { return chance(0.2) ? 0.0 : std::min(0.5, std::pow(10.0, uniform(-3.0, std::log10(0.5)))); };
  auto length_ms = [&](double lo, double hi) { return std::exp(uniform(std::log(lo), std::log(hi))); };

  s.ranks = pick(2, 4);
  if (seed >= kPlacedSeeds) s.draw_placement();
  s.calibration_calls = static_cast<unsigned>(pick(1, 2));
  s.loss_budget = chance(0.3) ? uniform(0.01, 0.1) : 1.0;  // a tight budget makes fallbacks
  s.sync_interval = static_cast<unsigned>(pick(1, 3));
  s.resend_rounds = static_cast<unsigned>(pick(1, 2));
  const int calls = pick(4, 8);
  const std::uint64_t per_rank = 64;  // the harness's chunk size
  for (int c = 0; c < calls; ++c) {
    PlannedCall call;
    // Two size classes: a few chunks per shard, or a few dozen.
    call.count = chance(0.6) ? per_rank * s.ranks * pick(1, 4) + pick(0, 63) : per_rank * s.ranks * pick(16, 40) + pick(0, 63);
    call.bounded = !chance(0.12);
    s.calls.push_back(call);
  }
  const double data = loss(), control = chance(0.5) ? data : loss();
  for (int d = 0; d < s.ranks * s.ranks; ++d) {
    s.data_loss.push_back(chance(0.3) ? loss() : data);
    s.control_loss.push_back(chance(0.3) ? loss() : control);
  }
  s.duplicate = chance(0.3) ? uniform(0, 0.2) : 0;
  s.delayed = chance(0.4) ? uniform(0, 0.3) : 0;
  s.max_delay_ms = uniform(0.1, 5);
  // Job time: calls of this size take a few milliseconds each once calibrated, and waits for lost
  // data or stalled peers up to a second: events spread over the first 1.5 s.
  for (int k = 0, n = chance(0.35) ? pick(1, 2) : 0; k < n; ++k) {
    Outage o;
    o.from = pick(0, s.ranks - 1);
    o.to = (o.from + pick(1, s.ranks - 1)) % s.ranks;
    o.start_ms = uniform(0, 1500);
    o.length_ms = length_ms(0.5, 6000);
    s.outages.push_back(o);
  }
  if (chance(0.2)) s.deschedules.push_back({pick(0, s.ranks - 1), uniform(0, 1500), length_ms(1, 600)});
  for (int k = 0, n = chance(0.3) ? pick(1, 2) : 0; k < n; ++k) s.late.push_back({pick(0, s.ranks - 1), pick(0, calls - 1), length_ms(1, 300)});
  if (chance(0.02)) s.no_bounded_transport = pick(0, s.ranks - 1);
  // A loaded host (drawn last, so the faults above stay what they were for each seed): a rank's
  // threads, or every rank's at once, stop for up to seconds, at any moment of the job.
  for (int k = 0, n = chance(0.4) ? pick(1, 4) : 0; k < n; ++k)
    s.deschedules.push_back({chance(0.3) ? kEveryRank : pick(0, s.ranks - 1), uniform(0, chance(0.5) ? 300 : 3000), length_ms(1, 2500)});
  // Drawn after the rest, which stays what it was per seed: a direction whose control messages
  // (lists, "decided", answers, heartbeats, notices) are cut while its data crosses, which ends
  // calls with a rank that never learns what its peers decided; a rank stopped as it gives up.
  if (chance(0.15)) {
    Outage o;
    o.from = pick(0, s.ranks - 1);
    o.to = (o.from + pick(1, s.ranks - 1)) % s.ranks;
    o.start_ms = uniform(0, 1500);
    o.length_ms = length_ms(50, 6000);
    o.control_only = true;
    s.outages.push_back(o);
  }
  if (chance(0.2)) s.give_up_stall_rank = pick(0, s.ranks - 1), s.give_up_stall_ms = length_ms(10, 800);
  s.float32_allreduces = s.calls.size();
  s.draw_other_shapes();
  if (s.placed()) s.keep_faults_between_hosts(), s.draw_host_faults();
  return s;
}

void FaultSchedule::draw_host_faults() {
  std::mt19937_64 rng(seed * 0x9fb21c651e98df25ull + 0x2c1b3c6dc9a4e3f1ull);
  auto uniform = [&](double a, double b) { return std::uniform_real_distribution<double>(a, b)(rng); };
  auto pick = [&](int a, int b) { return std::uniform_int_distribution<int>(a, b)(rng); };
  // The first calls calibrated their size classes (every slice's engine its own): these run
  // bounded, in three stages, under the same faults.
  for (int k = 0, n = pick(2, 5); k < n; ++k) {
    PlannedCall call = calls[static_cast<std::size_t>(pick(0, static_cast<int>(float32_allreduces) - 1))];
    call.bounded = true;
    calls.push_back(call);
  }
  if (uniform(0, 1) < 0.35) {
    std::vector<int> shared;  // ranks with a host mate
    for (int r = 0; r < ranks; ++r)
      if (std::count(host_of_rank.begin(), host_of_rank.end(), host_of(r)) > 1) shared.push_back(r);
    late.push_back({shared[static_cast<std::size_t>(pick(0, static_cast<int>(shared.size()) - 1))], pick(0, static_cast<int>(calls.size()) - 1),
                    std::exp(uniform(std::log(100.0), std::log(6000.0)))});
  }
}

int FaultSchedule::hosts() const {
  return placed() ? *std::max_element(host_of_rank.begin(), host_of_rank.end()) + 1 : ranks;
}

void FaultSchedule::draw_placement() {
  std::mt19937_64 rng(seed * 0x2545f4914f6cdd1dull + 0x5851f42d4c957f2dull);
  auto pick = [&](int a, int b) { return std::uniform_int_distribution<int>(a, b)(rng); };
  // 2+2, 3+2, 1+3, 2+2+2, 1+1+2, 4+2, ...: even and uneven, hosts of one rank among them.
  std::vector<int> counts;
  int sum = 0, most = 0;
  do {
    counts.assign(static_cast<std::size_t>(pick(2, 3)), 0);
    for (auto& c : counts) c = pick(1, counts.size() == 2 ? 4 : 3);
    sum = std::accumulate(counts.begin(), counts.end(), 0);
    most = *std::max_element(counts.begin(), counts.end());
  } while (sum > 6 || most < 2);
  ranks = sum;
  host_of_rank.clear();
  if (std::uniform_real_distribution<double>(0, 1)(rng) < 0.2) {
    // Round robin over the hosts that still have room (mpirun --map-by node).
    std::vector<int> left = counts;
    for (int h = 0; static_cast<int>(host_of_rank.size()) < sum; h = (h + 1) % static_cast<int>(counts.size()))
      if (left[static_cast<std::size_t>(h)] > 0) --left[static_cast<std::size_t>(h)], host_of_rank.push_back(h);
  } else {
    for (std::size_t h = 0; h < counts.size(); ++h) host_of_rank.insert(host_of_rank.end(), static_cast<std::size_t>(counts[h]), static_cast<int>(h));
  }
}

void FaultSchedule::keep_faults_between_hosts() {
  for (int f = 0; f < ranks; ++f)
    for (int t = 0; t < ranks; ++t)
      if (f != t && host_of(f) == host_of(t)) data_loss[static_cast<std::size_t>(f * ranks + t)] = control_loss[static_cast<std::size_t>(f * ranks + t)] = 0;
  for (auto& o : outages)
    if (host_of(o.from) == host_of(o.to)) {
      const int next = (host_of(o.from) + 1) % hosts();
      o.to = static_cast<int>(std::find(host_of_rank.begin(), host_of_rank.end(), next) - host_of_rank.begin());
    }
}

void FaultSchedule::draw_other_shapes() {
  std::mt19937_64 rng(seed * 0xd1b54a32d192ed03ull + 0x8cb92ba72f3d8dd7ull);
  auto chance = [&](double p) { return std::uniform_real_distribution<double>(0, 1)(rng) < p; };
  auto pick = [&](int a, int b) { return std::uniform_int_distribution<int>(a, b)(rng); };
  // One or two runs, each of one shape and size class (each shape calibrates its own classes):
  // its calibration calls, then one to three past it. Reduce-scatters mostly of float32.
  const CallShape shapes[] = {{Collective::reduce_scatter, ElementFormat::float32},
                              {Collective::reduce_scatter, ElementFormat::float32},
                              {Collective::allreduce, ElementFormat::float16},
                              {Collective::allreduce, ElementFormat::bfloat16},
                              {Collective::reduce_scatter, chance(0.5) ? ElementFormat::float16 : ElementFormat::bfloat16}};
  std::vector<PlannedCall> drawn;
  for (int run = 0, runs = pick(1, 2); run < runs; ++run) {
    const CallShape shape = shapes[pick(0, 4)];
    // Elements from 2^k to 2^(k+1) - 1: a few chunks, or a few dozen (chunks of 64).
    const int k = pick(6, 13);
    for (int c = 0, n = static_cast<int>(calibration_calls) + pick(1, 3); c < n; ++c) {
      PlannedCall call;
      call.shape = shape;
      call.count = (1ull << k) + static_cast<std::uint64_t>(pick(0, (1 << k) - 1));
      call.bounded = !chance(0.12);
      if (shape.scatter_only()) {
        // Uneven blocks, now and then empty ones (never all: the count is not zero).
        std::vector<std::uint64_t> weight(static_cast<std::size_t>(ranks));
        std::uint64_t sum = 0;
        for (auto& w : weight) sum += w = chance(0.25) ? 0 : static_cast<std::uint64_t>(chance(0.3) ? 4 : pick(1, 8));
        if (sum == 0) weight[static_cast<std::size_t>(pick(0, ranks - 1))] = sum = 1;
        std::uint64_t given = 0;
        for (std::size_t p = 0; p < weight.size(); ++p) call.blocks.push_back(call.count * weight[p] / sum), given += call.blocks.back();
        for (std::size_t p = weight.size(); p-- > 0;)
          if (weight[p] != 0) {
            call.blocks[p] += call.count - given;  // the rounding's remainder
            break;
          }
      }
      drawn.push_back(call);
    }
  }
  std::shuffle(drawn.begin(), drawn.end(), rng);  // runs interleaved: classes of several shapes at once
  calls.insert(calls.end(), drawn.begin(), drawn.end());
  if (chance(0.3)) late.push_back({pick(0, ranks - 1), static_cast<int>(float32_allreduces) + pick(0, static_cast<int>(drawn.size()) - 1),
                                   std::exp(std::uniform_real_distribution<double>(std::log(1.0), std::log(300.0))(rng))});
}

std::string FaultSchedule::describe() const {
  std::ostringstream o;
  o.precision(4);
  o << "seed " << seed << ": " << ranks << " ranks";
  if (placed()) {
    o << " on hosts";
    for (int r = 0; r < ranks; ++r) o << (r ? "," : " ") << host_of(r);
  }
  o << ", calibration " << calibration_calls << " call(s)/class, loss budget "
    << loss_budget << " (agreed every " << sync_interval << "), resend rounds " << resend_rounds << "\n  calls:";
  for (std::size_t c = 0; c < float32_allreduces; ++c) o << " " << calls[c].count << (calls[c].bounded ? "b" : "x");
  o << "\n  then:";
  for (std::size_t c = float32_allreduces; c < calls.size(); ++c) o << " " << shape_text(calls[c]);
  o << "\n  loss data/control per direction (from>to):";
  for (int f = 0; f < ranks; ++f)
    for (int t = 0; t < ranks; ++t)
      if (f != t) o << " " << f << ">" << t << " " << data_loss[f * ranks + t] << "/" << control_loss[f * ranks + t];
  o << "\n  duplicates " << duplicate << ", delayed " << delayed << " up to " << max_delay_ms << " ms";
  for (const auto& x : outages)
    o << "\n  outage " << x.from << ">" << x.to << (x.control_only ? " (control messages)" : "") << " from " << x.start_ms << " ms for "
      << x.length_ms << " ms";
  for (const auto& x : deschedules)
    o << "\n  " << (x.rank == kEveryRank ? std::string("every rank") : "rank " + std::to_string(x.rank)) << " descheduled from " << x.start_ms << " ms for " << x.length_ms << " ms";
  for (const auto& x : late) o << "\n  rank " << x.rank << " enters call " << x.call << " " << x.delay_ms << " ms late";
  if (no_bounded_transport >= 0) o << "\n  rank " << no_bounded_transport << " has no bounded transport";
  if (give_up_stall_rank >= 0) o << "\n  rank " << give_up_stall_rank << " stops " << give_up_stall_ms << " ms as it gives up on a call";
  return o.str();
}

}  // namespace optireduce::schedules
