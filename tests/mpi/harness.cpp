#include "harness.hpp"

#include <dlfcn.h>

#include <cctype>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace mpitest {

namespace {

std::string formatted(const char* format, va_list args) {
  char message[2048];
  std::vsnprintf(message, sizeof message, format, args);
  return message;
}

}  // namespace

void fail(const char* format, ...) {
  va_list args;
  va_start(args, format);
  const std::string message = formatted(format, args);
  va_end(args);
  std::fprintf(stderr, "allreduce_check [rank %d] FAIL: %s\n", world_rank(), message.c_str());
  std::fflush(stderr);
  MPI_Abort(MPI_COMM_WORLD, 1);
  std::abort();  // MPI_Abort does not return; keeps [[noreturn]] honest
}

void inconclusive(const char* format, ...) {
  va_list args;
  va_start(args, format);
  const std::string message = formatted(format, args);
  va_end(args);
  MPI_Barrier(MPI_COMM_WORLD);
  if (world_rank() == 0) std::printf("allreduce_check: INCONCLUSIVE (skipped): %s\n", message.c_str());
  std::fflush(stdout);
  MPI_Finalize();
  std::exit(77);
}

optireduce_process_stats process_stats() {
  using GetStats = int (*)(optireduce_process_stats*);
  static const auto get = reinterpret_cast<GetStats>(dlsym(RTLD_DEFAULT, "optireduce_get_process_stats"));
  if (!get)
    fail("optireduce_get_process_stats not found: liboptireduce.so was not preloaded "
         "(run under mpirun -x LD_PRELOAD=.../liboptireduce.so)");
  optireduce_process_stats s{};
  MPITEST_CHECK(get(&s) == 0, "optireduce_get_process_stats returned an error");
  return s;
}

namespace {

// Same syntax as the library: digits with an optional K, M or G suffix.
std::uint64_t parse_bytes(const char* text) {
  char* end = nullptr;
  std::uint64_t n = std::strtoull(text, &end, 10);
  switch (std::toupper(static_cast<unsigned char>(*end))) {
    case 'K': n <<= 10; break;
    case 'M': n <<= 20; break;
    case 'G': n <<= 30; break;
    default: break;
  }
  return n;
}

}  // namespace

const Rule& rule() {
  static const Rule r = [] {
    Rule x;
    if (const char* mode = std::getenv("OPTIREDUCE_MODE")) x.engine_on = std::strcmp(mode, "off") != 0;
    if (const char* min = std::getenv("OPTIREDUCE_MIN_BYTES")) x.min_bytes = parse_bytes(min);
    return x;
  }();
  return r;
}

bool must_intercept(std::int64_t count, MPI_Comm comm) {
  int inter = 0;
  MPI_Comm_test_inter(comm, &inter);
  return rule().engine_on && !inter && comm_size(comm) >= 2 &&
         static_cast<std::uint64_t>(count) * sizeof(float) >= rule().min_bytes;
}

StatsWindow::StatsWindow() : before_(process_stats()) {}

void StatsWindow::expect(std::uint64_t intercepted, std::uint64_t passthrough, std::uint64_t bytes,
                         const std::string& what) const {
  const optireduce_process_stats after = process_stats();
  const auto d_intercepted = after.intercepted_calls - before_.intercepted_calls;
  const auto d_passthrough = after.passthrough_calls - before_.passthrough_calls;
  const auto d_bytes = after.bytes_reduced - before_.bytes_reduced;
  MPITEST_CHECK(d_intercepted == intercepted,
                "%s: intercepted_calls grew by %llu, expected %llu (engine %s)", what.c_str(),
                static_cast<unsigned long long>(d_intercepted), static_cast<unsigned long long>(intercepted),
                d_intercepted < intercepted ? "bypassed" : "ran on an ineligible call");
  // With OPTIREDUCE_MODE=off the library is inert and counts nothing at all.
  if (rule().engine_on)
    MPITEST_CHECK(d_passthrough == passthrough, "%s: passthrough_calls grew by %llu, expected %llu", what.c_str(),
                  static_cast<unsigned long long>(d_passthrough), static_cast<unsigned long long>(passthrough));
  MPITEST_CHECK(d_bytes == bytes, "%s: bytes_reduced grew by %llu, expected %llu", what.c_str(),
                static_cast<unsigned long long>(d_bytes), static_cast<unsigned long long>(bytes));
  MPITEST_CHECK(after.entries_dropped == before_.entries_dropped, "%s: %llu entries dropped in exact runs",
                what.c_str(), static_cast<unsigned long long>(after.entries_dropped - before_.entries_dropped));
  MPITEST_CHECK(after.engine_failures == before_.engine_failures, "%s: engine creation failed", what.c_str());
}

std::uint64_t hash_bytes(const void* data, std::size_t bytes) {
  std::uint64_t h = 1469598103934665603ull;  // FNV-1a
  const auto* p = static_cast<const unsigned char*>(data);
  for (std::size_t i = 0; i < bytes; ++i) h = (h ^ p[i]) * 1099511628211ull;
  return h;
}

void expect_same_on_all_ranks(const void* data, std::size_t bytes, MPI_Comm comm, const std::string& what) {
  const std::uint64_t h = hash_bytes(data, bytes);
  // One MAX over {h, ~h} yields the maximum and (inverted) the minimum hash over the ranks.
  std::uint64_t extremes[2] = {h, ~h};
  MPI_Allreduce(MPI_IN_PLACE, extremes, 2, MPI_UINT64_T, MPI_MAX, comm);
  MPITEST_CHECK(extremes[0] == ~extremes[1], "%s: results differ between ranks (hash %016llx here, range %016llx..%016llx)",
                what.c_str(), static_cast<unsigned long long>(h), static_cast<unsigned long long>(~extremes[1]),
                static_cast<unsigned long long>(extremes[0]));
}

std::vector<float> integer_pattern(std::int64_t count, int rank, int salt) {
  std::vector<float> v(static_cast<std::size_t>(count));
  for (std::int64_t i = 0; i < count; ++i) {
    const std::uint64_t x = static_cast<std::uint64_t>(i) * 2654435761ull + static_cast<std::uint64_t>(rank + 1) * 97531ull +
                            static_cast<std::uint64_t>(salt) * 7919ull;
    v[static_cast<std::size_t>(i)] = static_cast<float>(static_cast<int>(x % 2001) - 1000);
  }
  return v;
}

void expect_bitwise_equal(const std::vector<float>& got, const std::vector<float>& want, const std::string& what) {
  MPITEST_CHECK(got.size() == want.size(), "%s: %zu results, expected %zu", what.c_str(), got.size(), want.size());
  if (got.empty() || std::memcmp(got.data(), want.data(), got.size() * sizeof(float)) == 0) return;
  std::size_t i = 0;
  while (std::memcmp(&got[i], &want[i], sizeof(float)) == 0) ++i;
  std::size_t wrong = 0;
  for (std::size_t j = i; j < got.size(); ++j) wrong += std::memcmp(&got[j], &want[j], sizeof(float)) != 0;
  fail("%s: element %zu of %zu is %.9g, PMPI_Allreduce gives %.9g (%zu elements differ)", what.c_str(), i, got.size(),
       static_cast<double>(got[i]), static_cast<double>(want[i]), wrong);
}

int comm_rank(MPI_Comm comm) {
  int r = 0;
  MPI_Comm_rank(comm, &r);
  return r;
}

int comm_size(MPI_Comm comm) {
  int s = 0;
  MPI_Comm_size(comm, &s);
  return s;
}

int world_rank() { return comm_rank(MPI_COMM_WORLD); }

void* library_symbol(const char* name) {
  void* f = dlsym(RTLD_DEFAULT, name);
  if (!f) fail("%s not found: liboptireduce.so was not preloaded", name);
  return f;
}

optireduce_call_stats last_call(MPI_Comm comm) {
  static const auto get = lookup<LastCall>("optireduce_comm_last_call");
  optireduce_call_stats s{};
  MPITEST_CHECK(get(comm, &s) == 0, "optireduce_comm_last_call returned an error");
  return s;
}

}  // namespace mpitest
