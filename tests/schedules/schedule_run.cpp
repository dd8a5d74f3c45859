#include "schedule_run.hpp"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>
#include <sstream>
#include <thread>
#include <cstdio>
#include <cstdlib>

#include "optireduce/log.hpp"

#include "optireduce/engine/engine/engine.hpp"
#include "host_view.hpp"
#include "job_layer.hpp"
#include "planned_call.hpp"
#include "scheduled_network.hpp"
#include "../unit/inproc_transport.hpp"

namespace optireduce::schedules {

namespace {

// Log lines of the engines (SCHEDULES_LOG=debug) name the rank thread and the job time.
thread_local int t_rank = -1;
Clock::time_point g_log_start = Clock::now();
void write_log_line(LogLevel, const char* text) {
  std::fprintf(stderr, "[%9.3f ms] rank %d: %s\n", std::chrono::duration<double, std::milli>(Clock::now() - g_log_start).count(), t_rank, text);
}

// How much later than asked the machine's scheduler runs a thread, sampled all through the run:
// time the threads lost to other jobs on a shared host, which no deadline of the engine covers.
class SchedulerDelay {
 public:
  SchedulerDelay() : thread_([this] { sample(); }) {}
  ~SchedulerDelay() {
    stop_ = true;
    thread_.join();
  }
  // The worst lateness of any sample taken between `from` and `to`.
  double worst_ms(Clock::time_point from, Clock::time_point to) {
    std::lock_guard lock(mutex_);
    double worst = 0;
    for (const auto& [at, late] : samples_)
      if (at >= from && at <= to + std::chrono::milliseconds(5)) worst = std::max(worst, late);
    return worst;
  }

 private:
  void sample() {
    while (!stop_) {
      const auto asked = Clock::now() + std::chrono::milliseconds(2);
      std::this_thread::sleep_until(asked);
      const auto woke = Clock::now();
      std::lock_guard lock(mutex_);
      samples_.emplace_back(woke, std::chrono::duration<double, std::milli>(woke - asked).count());
    }
  }
  std::atomic<bool> stop_{false};
  std::mutex mutex_;
  std::vector<std::pair<Clock::time_point, double>> samples_;
  std::thread thread_;
};

struct Seen {
  CallStats stats;
  Clock::time_point entered, left;
  CallBuffers buffers;
};

bool is_exact_kind(CallKind k) { return k == CallKind::exact || k == CallKind::calibration || k == CallKind::fallback; }

}  // namespace

SeedOutcome run_seed(const FaultSchedule& s) {
  SeedOutcome outcome;
  const auto began = Clock::now();
  auto problem = [&](const std::string& what) { outcome.disagreements.push_back(what); };
  const int ranks = s.ranks;
  const int calls = static_cast<int>(s.calls.size());

  EngineOptions options;
  options.chunk_elems = 64;
  options.timeout = std::chrono::milliseconds(4000);
  options.watchdog = std::chrono::milliseconds(5000);
  options.calibration_calls = s.calibration_calls;
  options.loss_budget = s.loss_budget;
  options.sync_interval = s.sync_interval;
  options.reliable_calls_after_overrun = 2;
  options.resend_rounds = s.resend_rounds;
  options.hadamard = HadamardMode::off;
  options.step_aside = false;
  options.faults.stall_rank = s.give_up_stall_rank;
  options.faults.stall_ms = s.give_up_stall_ms;

  SchedulerDelay scheduler;
  auto rendezvous = std::make_shared<Rendezvous>(ranks);
  auto exact_fabric = std::make_shared<testing::InProcFabric>(ranks);
  auto fabric = std::make_shared<ScheduledFabric>(s, Clock::now());
  std::vector<std::atomic<int>> current(static_cast<std::size_t>(ranks));
  for (auto& c : current) c = -1;  // engine creation
  std::vector<std::unique_ptr<Engine>> engines(static_cast<std::size_t>(ranks));
  std::vector<Status> created(static_cast<std::size_t>(ranks));
  std::vector<std::vector<Seen>> seen(static_cast<std::size_t>(calls), std::vector<Seen>(static_cast<std::size_t>(ranks)));
  std::vector<AgreedCounts> agreed(static_cast<std::size_t>(ranks));
  const HostView hosts(s);
  std::vector<Status> tiers_made(static_cast<std::size_t>(ranks));

  if (const char* level = std::getenv("SCHEDULES_LOG"); level && std::string(level) == "debug") {
    log_sink().level.store(static_cast<int>(LogLevel::debug));
    log_sink().write.store(&write_log_line);
    g_log_start = Clock::now();
  }
  std::vector<std::thread> threads;
  for (int r = 0; r < ranks; ++r)
    threads.emplace_back([&, r] {
      t_rank = r;
      std::unique_ptr<Transport> bounded;
      if (r != s.no_bounded_transport) bounded = std::make_unique<ScheduledTransport>(fabric, r);
      auto exact = std::make_unique<DescheduledTransport>(std::make_unique<testing::InProcTransport>(exact_fabric, r), fabric, r);
      engines[r] = Engine::create(r, ranks, std::move(exact), std::move(bounded),
                                  std::make_unique<CheckedBootstrap>(rendezvous, r, current[r]), options, created[r]);
      if (!engines[r]) return;
      Engine& engine = *engines[r];
      if (s.placed()) {
        // Each slice's exchange: an engine over its holders (one per host, by host), its datagrams
        // on a channel of the scheduled network of their own, its exact path beside them.
        auto make = [&, r](int slice, int member, int members, std::unique_ptr<Bootstrap> view, Status& st) {
          std::unique_ptr<Transport> lossy;
          if (r != s.no_bounded_transport)
            lossy = std::make_unique<ScheduledTransport>(fabric, 1 + slice, member, hosts.slices().slices[static_cast<std::size_t>(slice)].ranks);
          auto exact = std::make_unique<DescheduledTransport>(
              std::make_unique<testing::InProcTransport>(exact_fabric->sub_fabric(static_cast<std::uint64_t>(1 + slice), 0, members), member), fabric, r);
          EngineOptions sub = options;
          sub.hierarchy = HierarchyMode::off;
          sub.faults.stall_rank = r == s.give_up_stall_rank ? member : -1;
          return Engine::create(member, members, std::move(exact), std::move(lossy), std::move(view), sub, st);
        };
        tiers_made[static_cast<std::size_t>(r)] = engine.enable_hierarchy(hosts.placement(), make);
      }
      for (int c = 0; c < calls; ++c) {
        for (const auto& l : s.late)
          if (l.rank == r && l.call == c) std::this_thread::sleep_for(std::chrono::duration<double, std::milli>(l.delay_ms));
        Seen& o = seen[c][r];
        current[r] = c;
        o.entered = Clock::now();
        o.stats = run_planned_call(engine, s.calls[c], c, o.buffers);
        o.left = Clock::now();
      }
      agreed[r] = engine.agreed();
    });
  for (auto& t : threads) t.join();
  for (const auto& p : rendezvous->problems()) problem(p);

  const int made = static_cast<int>(std::count_if(engines.begin(), engines.end(), [](const auto& e) { return e != nullptr; }));
  if (made != 0 && made != ranks) problem("engine creation: " + std::to_string(made) + " of " + std::to_string(ranks) + " ranks got an engine");
  for (int r = 0; r < ranks && made == ranks && s.placed(); ++r)
    if (!tiers_made[static_cast<std::size_t>(r)].ok() || !engines[r]->tiers())
      problem("rank " + std::to_string(r) + " took no three stages: " + tiers_made[static_cast<std::size_t>(r)].text());
  if (made == 0) ++outcome.calls_failed_everywhere;

  std::ostringstream table;
  table.precision(6);
  bool failed_before = false;
  for (int c = 0; c < calls && made == ranks; ++c) {
    const auto& row = seen[c];
    const PlannedCall& planned = s.calls[c];
    auto where = [&](int r) { return "call " + std::to_string(c) + " rank " + std::to_string(r); };
    // The calls of other shapes name theirs in the table.
    const std::string shape = static_cast<std::size_t>(c) < s.float32_allreduces ? "" : " (" + shape_text(planned) + ")";
    int ok = 0;
    Clock::time_point last_entry{};
    for (int r = 0; r < ranks; ++r) {
      const auto& o = row[r];
      ok += o.stats.ok();
      last_entry = std::max(last_entry, o.entered);
      table << "  " << where(r) << shape << ": " << to_string(o.stats.kind) << " " << (o.stats.ok() ? "ok" : "FAILED (" + o.stats.status.text() + ")")
            << ", entered " << fabric->job_ms(o.entered) << " ms, left " << fabric->job_ms(o.left) << " ms, deadlines "
            << o.stats.deadline_us[0] << "/" << o.stats.deadline_us[1] << " us, phases " << o.stats.phase_us[0] << "/"
            << o.stats.phase_us[1] << " us, dropped " << o.stats.dropped_entries << ", filled " << o.stats.filled_entries
            << (o.stats.fill_agreed ? ", fill agreed" : "") << (o.stats.stages.hierarchical ? ", three stages" : "") << "\n";
    }
    ++outcome.calls_run;
    if (ok != 0 && ok != ranks) {
      problem("call " + std::to_string(c) + ": " + std::to_string(ok) + " of " + std::to_string(ranks) + " ranks succeeded");
      continue;
    }
    if (ok == 0) {
      if (!failed_before) ++outcome.calls_failed_everywhere;
      failed_before = true;
      continue;
    }
    if (failed_before) problem("call " + std::to_string(c) + " succeeded after an earlier call failed");
    // A flat call has one kind on every rank. A three-stage call runs an exchange per slice, each
    // an engine of its own: a rank reports its first exchange's kind, which every rank whose
    // first exchange that slice is shares; an entry is exact where its slice's exchange was.
    const bool three_stages = row[0].stats.stages.hierarchical;
    const HostView::CallSlices slices = three_stages ? hosts.call_slices(planned.count, planned.shape.format) : HostView::CallSlices{};
    std::vector<int> slice_kind(slices.ranges.size(), -1);
    const CallKind kind = row[0].stats.kind;
    bool every_kind_exact = true, every_kind_bounded = true;
    for (int r = 0; r < ranks; ++r) {
      const auto& o = row[r];
      if (o.stats.stages.hierarchical != three_stages) problem(where(r) + ": three stages on rank 0, not here, or the other way round");
      const int first = three_stages ? slices.first_of_rank[static_cast<std::size_t>(r)] : -1;
      if (three_stages && first < 0) continue;  // no exchange with elements: no kind of its own
      every_kind_exact = every_kind_exact && is_exact_kind(o.stats.kind);
      every_kind_bounded = every_kind_bounded && o.stats.kind == CallKind::bounded;
      if (!three_stages) {
        if (o.stats.kind != kind) problem(where(r) + ": kind " + to_string(o.stats.kind) + ", rank 0's " + to_string(kind));
        continue;
      }
      int& shared = slice_kind[static_cast<std::size_t>(first)];
      if (shared >= 0 && shared != static_cast<int>(o.stats.kind))
        problem(where(r) + ": kind " + to_string(o.stats.kind) + " of slice " + std::to_string(first) + ", another holder's " +
                to_string(static_cast<CallKind>(shared)));
      shared = static_cast<int>(o.stats.kind);
    }
    auto exact_at = [&](std::uint64_t i) {  // whether entry i of the whole buffer came from an exact exchange
      if (!three_stages) return is_exact_kind(kind);
      const int slice = slices.slice_of(i);
      return slice >= 0 && slice_kind[static_cast<std::size_t>(slice)] >= 0 && is_exact_kind(static_cast<CallKind>(slice_kind[static_cast<std::size_t>(slice)]));
    };
    double budget[2] = {0, 0};
    for (int r = 0; r < ranks; ++r) {
      const auto& o = row[r];
      // A reduce-scatter's blocks are each rank's own: only an allreduce's result is the same everywhere.
      const std::uint64_t count = result_entries(planned, r), first = first_entry(planned, r);
      if (!planned.shape.scatter_only() &&
          std::memcmp(o.buffers.out.data(), row[0].buffers.out.data(), count * planned.shape.element_bytes()) != 0)
        problem(where(r) + ": the result differs from rank 0's");
      if (!tail_intact(planned, r, o.buffers)) problem(where(r) + ": the call wrote past its result");
      if (o.stats.entries != count) problem(where(r) + ": " + std::to_string(o.stats.entries) + " entries reported, " + std::to_string(count) + " in its result");
      for (int p = 0; p < 2; ++p) budget[p] = std::max(budget[p], o.stats.deadline_us[p]);
      std::uint64_t differing = 0, inexact_where_exact = 0;
      bool subset_sums = true;
      for (std::uint64_t i = 0; i < count; ++i) {
        // The exact sum, and each subset's, in float64: every one is exact in the call's format.
        // In three stages a host's ranks are summed exactly inside it: a subset of whole hosts.
        const double f = factor(c, first + i, ranks), got = result_value(planned, o.buffers, i);
        const bool exact = got == f * ((1 << ranks) - 1);
        differing += !exact;
        inexact_where_exact += !exact && exact_at(first + i);
        const double subset = got / f;
        subset_sums = subset_sums && std::isfinite(got) && subset == std::floor(subset) && subset >= 0 && subset < (1 << ranks) &&
                      hosts.possible_subset(static_cast<unsigned>(subset), three_stages);
      }
      if (!subset_sums)
        problem(where(r) + (three_stages ? ": an entry is no sum of whole hosts' contributions (worse than dropping what was missing)"
                                         : ": an entry is no sum of the ranks' contributions (worse than dropping what was missing)"));
      if (inexact_where_exact != 0 || (every_kind_exact && o.stats.dropped_entries != 0))
        problem(where(r) + ": an exact call's result has " + std::to_string(inexact_where_exact) + " inexact entries, " +
                std::to_string(o.stats.dropped_entries) + " counted as dropped");
      if (differing > o.stats.dropped_entries || o.stats.filled_entries > o.stats.dropped_entries || o.stats.dropped_entries > count)
        problem(where(r) + ": " + std::to_string(differing) + " entries inexact, " + std::to_string(o.stats.dropped_entries) +
                " counted as dropped, " + std::to_string(o.stats.filled_entries) + " as filled");
    }
    outcome.three_stage_calls += three_stages;
    outcome.three_stage_bounded += three_stages && every_kind_bounded;
    if (!every_kind_bounded) continue;
    // What the engine's own waits allow a bounded call from the last rank's entry (the deadlines
    // agreed for it): each phase its budget stretched to its limit with its resend rounds, the
    // fill agreement's wait for peers whose phases stretched as long, one stall wait for a
    // silent peer, the list exchange's wait for a peer's word (call/list_exchange.cpp); plus the descheduling the schedule injected meanwhile and twice the worst
    // lateness of the machine's scheduler then (a wait that wakes late, twice in a row). A call
    // past that is counted; past its hard bound, it breaks the bound.
    using DC = DeadlineController;
    double allowed_ms = 0;
    for (int p = 0; p < 2; ++p)
      allowed_ms += 2 * DC::stretch_limit_us(budget[p]) + s.resend_rounds * DC::resend_wait_us(budget[p]) + DC::follow_wait_us(budget[p]);
    const double last_phase = budget[planned.shape.scatter_only() ? 0 : 1];  // a reduce-scatter has only its scatter-reduce
    allowed_ms += DC::agreement_wait_us(last_phase) + DC::stall_wait_us(std::max(budget[0], budget[1])) + 2 * DC::decision_linger_us(last_phase);
    // In three stages a rank runs its slices' exchanges one after another, and a holder that
    // comes to one late (busy with the one before) holds its peers there: as many bounds in a row.
    allowed_ms *= three_stages ? slices.longest_chain : 1;
    allowed_ms /= 1000;
    Clock::time_point last_left{};
    for (int r = 0; r < ranks; ++r) last_left = std::max(last_left, row[r].left);
    // The injected descheduling between two moments (job time), each stretch counted once.
    auto descheduled_ms = [&](Clock::time_point a, Clock::time_point b) {
      double ms = 0;
      for (const auto& d : s.deschedules) {
        const double from = std::max(d.start_ms, fabric->job_ms(a)), to = std::min(d.start_ms + d.length_ms, fabric->job_ms(b));
        if (to > from) ms += to - from;
      }
      return ms;
    };
    allowed_ms += descheduled_ms(last_entry, last_left);
    const double margin_ms = 2 * scheduler.worst_ms(last_entry, last_left) + 5;
    allowed_ms += margin_ms;
    // Where a peer's word that it knows never comes (every copy lost, and the peer, gone on,
    // answers nothing), a rank that knows waits for it until that peer's hard deadline and its
    // failure notice's wait, twice where it was stopped past the first (call/list_exchange.cpp):
    // the hard bound, counted from the first
    // entry plus the entries' spread. A rank descheduled as it entered is heard from only once it
    // runs again (the engine cannot tell that from a late entry): the descheduling counts too.
    Clock::time_point first_entry = last_entry;
    for (int r = 0; r < ranks; ++r) first_entry = std::min(first_entry, row[r].entered);
    const double chain = three_stages ? slices.longest_chain : 1;
    const double hard_ms = chain * (double(options.timeout.count()) + 2 * DC::notice_wait_us() / 1000) +
                           2 * std::chrono::duration<double, std::milli>(last_entry - first_entry).count() +
                           2 * descheduled_ms(first_entry, last_left) + margin_ms;
    bool past_waits = false;
    for (int r = 0; r < ranks; ++r) {
      const double took_ms = std::chrono::duration<double, std::milli>(row[r].left - last_entry).count();
      past_waits = past_waits || took_ms > allowed_ms;
      if (took_ms > hard_ms) {
        std::ostringstream m;
        m << where(r) << ": ended " << took_ms << " ms after the last rank's entry, past its hard bound " << hard_ms << " ms";
        problem(m.str());
      }
    }
    outcome.past_waits += past_waits;
  }
  for (int r = 1; r < ranks && made == ranks; ++r) {
    const auto &a = agreed[r], &b = agreed[0];
    if (a.divergent_calls != b.divergent_calls || a.fallbacks != b.fallbacks || a.calibration_reruns != b.calibration_reruns)
      problem("rank " + std::to_string(r) + "'s agreed counts differ from rank 0's");
  }
  if (made == ranks && agreed[0].divergent_calls != 0) problem("the engine counted divergent calls");
  const auto net = fabric->counts();
  table << "  network: " << net.sent << " sent, " << net.lost << " lost, " << net.cut << " cut by outages, " << net.doubled
        << " doubled, " << net.held << " held\n";
  outcome.table = table.str();
  outcome.seconds = std::chrono::duration<double>(Clock::now() - began).count();
  return outcome;
}

}  // namespace optireduce::schedules
