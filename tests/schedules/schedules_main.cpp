// Randomized fault schedules against the engine (schedule_run.hpp says what each seed checks).
//   optireduce_schedules --seeds N [--from S] [--jobs J]   N seeds from S (default 1), J at a time (4)
//   optireduce_schedules --seed S                          one seed, its schedule and every call printed
// A failing seed prints its schedule, what broke and every call; rerun it with --seed. The last
// line is "N seeds, M disagreements, F calls failed everywhere" (M: seeds where any hang,
// disagreement or broken bound showed); the exit status is 1 when M > 0.
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <vector>
#include <algorithm>
#include <mutex>
#include <string>
#include <thread>

#include "fault_schedule.hpp"
#include "schedule_run.hpp"

namespace {

// A seed that does not end in this long hangs somewhere the run's own bounds do not reach. A
// placed seed's calls run their slices' exchanges one after another (a host of one rank holds
// every slice), each up to its hard bound under harsh loss: such a seed took 81 s alone and past
// 90 s beside 15 others.
constexpr auto kSeedLimit = std::chrono::seconds(90);
constexpr auto kPlacedSeedLimit = std::chrono::seconds(240);
std::chrono::seconds seed_limit(unsigned long long seed) {
  return seed >= optireduce::schedules::FaultSchedule::kPlacedSeeds ? kPlacedSeedLimit : kSeedLimit;
}

bool number(const char* text, unsigned long long& out) {
  char* end = nullptr;
  out = std::strtoull(text, &end, 10);
  return end && *end == '\0' && end != text;
}

int usage(const char* why) {
  std::fprintf(stderr, "optireduce_schedules: %s; usage: optireduce_schedules --seeds N [--from S] [--jobs J] | --seed S\n", why);
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  unsigned long long seeds = 0, from = 1, one = 0, jobs = 4;
  bool single = false;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (i + 1 >= argc) return usage(("a value is missing after " + a).c_str());
    unsigned long long v = 0;
    if (!number(argv[++i], v)) return usage(("not a number after " + a + ": " + argv[i]).c_str());
    if (a == "--seeds") seeds = v;
    else if (a == "--from") from = v;
    else if (a == "--seed") one = v, single = true;
    else if (a == "--jobs") jobs = v;
    else return usage(("unknown option " + a + " (accepted: --seeds, --from, --seed, --jobs)").c_str());
  }
  if (single) seeds = 1, from = one;
  if (seeds == 0) return usage("give --seeds N (N > 0) or --seed S");

  // Seeds run side by side (their ranks mostly wait on timers); each is checked on its own.
  const auto workers = single ? 1ull : std::max(1ull, jobs);
  std::mutex mutex;
  std::condition_variable cv;
  std::map<unsigned long long, std::chrono::steady_clock::time_point> running;
  bool finished = false;
  std::thread watchdog([&] {
    std::unique_lock lock(mutex);
    while (!cv.wait_for(lock, std::chrono::seconds(1), [&] { return finished; }))
      for (const auto& [seed, since] : running)
        if (std::chrono::steady_clock::now() - since > seed_limit(seed)) {
          std::printf("seed %llu: hang: no end after %lld s\n%s\n", seed, static_cast<long long>(seed_limit(seed).count()),
                      optireduce::schedules::FaultSchedule::draw(seed).describe().c_str());
          std::fflush(stdout);
          std::_Exit(3);
        }
  });

  unsigned long long disagreements = 0, failed_everywhere = 0, past_waits = 0, three_stages = 0, three_stages_bounded = 0, next = from;
  double slowest = 0;
  unsigned long long slowest_seed = 0;
  std::vector<std::thread> pool;
  for (unsigned long long w = 0; w < workers; ++w)
    pool.emplace_back([&] {
      for (;;) {
        unsigned long long seed;
        {
          std::lock_guard lock(mutex);
          if (next >= from + seeds) return;
          seed = next++;
          running[seed] = std::chrono::steady_clock::now();
        }
        const auto schedule = optireduce::schedules::FaultSchedule::draw(seed);
        const auto outcome = optireduce::schedules::run_seed(schedule);
        std::lock_guard lock(mutex);
        running.erase(seed);
        failed_everywhere += static_cast<unsigned long long>(outcome.calls_failed_everywhere);
        past_waits += static_cast<unsigned long long>(outcome.past_waits);
        three_stages += static_cast<unsigned long long>(outcome.three_stage_calls);
        three_stages_bounded += static_cast<unsigned long long>(outcome.three_stage_bounded);
        if (outcome.seconds > slowest) slowest = outcome.seconds, slowest_seed = seed;
        if (!outcome.disagreements.empty()) ++disagreements;
        if (!outcome.disagreements.empty() || single) {
          std::printf("%s\n", schedule.describe().c_str());
          for (const auto& d : outcome.disagreements) std::printf("  DISAGREEMENT: %s\n", d.c_str());
          std::printf("%s  (%.2f s; replay: optireduce_schedules --seed %llu)\n", outcome.table.c_str(), outcome.seconds, seed);
          std::fflush(stdout);
        }
      }
    });
  for (auto& t : pool) t.join();
  {
    std::lock_guard lock(mutex);
    finished = true;
  }
  cv.notify_all();
  watchdog.join();
  std::printf("%llu bounded calls outlasted their deadlines' waits (held by a peer's lost word, within their hard bound)\n",
              past_waits);
  if (three_stages) std::printf("%llu calls succeeded in three stages, %llu of them bounded in every exchange\n", three_stages, three_stages_bounded);
  std::printf("slowest seed %llu: %.2f s\n%llu seeds, %llu disagreements, %llu calls failed everywhere\n", slowest_seed, slowest, seeds, disagreements,
              failed_everywhere);
  return disagreements ? 1 : 0;
}
