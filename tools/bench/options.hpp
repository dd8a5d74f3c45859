// What one run of optireduce-bench measures (its command line, parsed) and the byte sizes it reads.
#pragma once

#include <cinttypes>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "reduction.hpp"

namespace optireduce::bench {

// One entry of a run: a size (latency, sweep), a step of buckets (step) or a model's step (model).
struct Entry {
  std::string name;
  std::vector<std::uint64_t> buckets;  // reduced in reverse order, each in its own buffer
  double compute_s = 0;                // sleep before the buckets (a model's forward and backward pass)
  int warmup_calls = 0;                // untimed calls per size class before the warm-up iterations
  std::string model;                   // model: its name, parameters, scale and full bucket count
  std::uint64_t params = 0;
  double scale = 1;
  std::size_t full_buckets = 0;
};

inline Entry named_entry(std::string name, std::vector<std::uint64_t> buckets) {
  Entry e;
  e.name = std::move(name);
  e.buckets = std::move(buckets);
  return e;
}

struct Options {
  std::string mode = "latency";  // latency, sweep, step, model
  std::vector<Entry> entries;
  int warmup = 30;
  int iters = 50;
  bool in_place = false;
  Format format = Format::f32;
  Collective collective = Collective::allreduce;
  bool check = true;          // every result against the exact sum
  bool host_barrier = false;  // --barrier host
  double tolerance = 1e-3;
  std::uint64_t corrupt_call = 0;
  std::string json_path, label;
};

// "4096", "64K", "6.25M", "1G": bytes, a positive multiple of 4 that MPI's int count can hold.
inline std::uint64_t parse_size(const std::string& s) {
  std::size_t pos = 0;
  double v = 0;
  try {
    v = std::stod(s, &pos);
  } catch (const std::exception&) {
    throw std::invalid_argument("\"" + s + "\" is not a size (e.g. 4096, 64K, 6.25M, 1G)");
  }
  const std::string suffix = s.substr(pos);
  double mul = 1;
  if (suffix == "K" || suffix == "k") mul = 1024;
  else if (suffix == "M" || suffix == "m") mul = 1024.0 * 1024;
  else if (suffix == "G" || suffix == "g") mul = 1024.0 * 1024 * 1024;
  else if (!suffix.empty()) throw std::invalid_argument("bad size suffix in \"" + s + "\" (K, M, G: KiB, MiB, GiB)");
  const double bytes = v * mul;
  if (!(bytes >= 4) || bytes != std::floor(bytes) || static_cast<std::uint64_t>(bytes) % 4 != 0 ||
      bytes / 4 > 2147483647.0)
    throw std::invalid_argument("size \"" + s + "\" is not a positive multiple of 4 bytes below 8 GiB");
  return static_cast<std::uint64_t>(bytes);
}

inline std::vector<std::uint64_t> parse_sizes(const std::string& list) {
  std::vector<std::uint64_t> out;
  std::size_t start = 0;
  while (start <= list.size()) {
    const std::size_t comma = list.find(',', start);
    const std::string item = list.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    out.push_back(parse_size(item));
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return out;
}

inline std::string size_name(std::uint64_t n) {
  char b[32];
  if (n % (1u << 20) == 0) std::snprintf(b, sizeof b, "%" PRIu64 "M", n >> 20);
  else if (n % (1u << 10) == 0) std::snprintf(b, sizeof b, "%" PRIu64 "K", n >> 10);
  else std::snprintf(b, sizeof b, "%" PRIu64 "B", n);
  return b;
}

// Sizes from `from` to `to`, each `factor` times the one before (nccl-tests' -b -e -f).
inline std::vector<std::uint64_t> sweep_sizes(std::uint64_t from, std::uint64_t to, double factor) {
  if (from > to) throw std::invalid_argument("--min is above --max");
  if (!(factor > 1)) throw std::invalid_argument("--factor must be above 1");
  std::vector<std::uint64_t> out;
  for (double b = static_cast<double>(from); b <= static_cast<double>(to) * (1 + 1e-9); b *= factor) {
    std::uint64_t bytes = static_cast<std::uint64_t>(std::llround(b)) / 4 * 4;
    if (out.empty() || bytes > out.back()) out.push_back(bytes);
  }
  return out;
}

}  // namespace optireduce::bench
