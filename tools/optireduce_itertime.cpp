// optireduce-itertime: the MPI side of scripts/compare.sh. Two modes, one JSON format (the Gloo
// twin is scripts/compare/gloo_bench.py):
//
//   latency: every call of a float32 MPI_Allreduce(SUM) of each size, timed one by one, recorded
//            as the max over ranks (a call lasts until its slowest rank is done); all samples are
//            written, so the caller can draw CDFs and take any percentile.
//   model:   replays the data-parallel step of a model: a sleep standing in for the GPU's forward
//            and backward pass, then one MPI_Allreduce per DDP gradient bucket, back to back.
//            Reports seconds per iteration (max over ranks).
//
// The program calls plain MPI_Allreduce and does not link liboptireduce: run it as is for Open MPI
// and with LD_PRELOAD=liboptireduce.so for OptiReduce. When the library is loaded, its C API
// (found with dlsym) gives the dropped fraction and the kinds of engine calls of the timed window.
//
//   mpirun -np 4 optireduce-itertime latency --sizes 1M,4M --iters 30 --warmup 25 --json out.json
//   mpirun -np 4 optireduce-itertime model --model resnet50 --iters 5 --json out.json
#include <mpi.h>

#include <dlfcn.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "cli_errors.hpp"
#include "optireduce/optireduce.h"

namespace {

// ---- the models -------------------------------------------------------------------------------
//
// Parameter counts: ResNet-50 25.6 M (He et al., "Deep Residual Learning for Image Recognition",
// CVPR 2016; torchvision's resnet50 has 25,557,032), BERT-large 340 M (Devlin et al., "BERT",
// NAACL 2019, Table/Section 3: 24 layers, 1024 hidden, 16 heads, 340M parameters), GPT-2 small
// 124 M (Radford et al., "Language Models are Unsupervised Multitask Learners", 2019; the
// smallest GPT-2, 117M in the paper, 124,439,808 in the released checkpoint).
//
// Compute time per step, the sleep that stands in for forward + backward on one GPU:
//  - ResNet-50: 0.213 s = 256 images per GPU / 1200 img/s, NVIDIA DeepLearningExamples,
//    PyTorch/Classification/ConvNets/resnet50v1.5/README.md, "Training performance: NVIDIA DGX-1
//    16GB (8x V100 16GB)", 1 GPU, mixed precision (a published measurement).
//  - BERT-large: 0.42 s, and GPT-2: 0.15 s are ESTIMATES, not measurements: 6 x parameters x
//    tokens per GPU step (the training-FLOPs rule of Kaplan et al., "Scaling Laws for Neural
//    Language Models", 2020) at 40 TFLOP/s achieved (about a third of a V100's 125 TFLOP/s mixed
//    precision peak): BERT-large 64 sequences x 128 tokens -> 6 x 340e6 x 8192 / 40e12 = 0.42 s;
//    GPT-2 8 sequences x 1024 tokens -> 6 x 124e6 x 8192 / 40e12 = 0.15 s.
// --compute-ms overrides them.
//
// Buckets: PyTorch DistributedDataParallel fills gradient buckets of bucket_cap_mb = 25 (MiB) in
// reverse parameter order, and its first bucket is capped at 1 MiB
// (torch.distributed._DEFAULT_FIRST_BUCKET_BYTES) so communication starts early. Here: one 1 MiB
// bucket, then 25 MiB buckets, then the remainder, all float32.
struct Model {
  const char* name;
  std::uint64_t params;
  double compute_s;
};
const Model kModels[] = {
    {"resnet50", 25'557'032ULL, 0.213},
    {"bert-large", 340'000'000ULL, 0.42},
    {"gpt2", 124'439'808ULL, 0.15},
};

constexpr std::uint64_t kMiB = 1ULL << 20;

std::vector<std::uint64_t> ddp_buckets(std::uint64_t params, std::uint64_t bucket_bytes, std::uint64_t first_bytes) {
  std::uint64_t left = params * 4;
  std::vector<std::uint64_t> out;
  const std::uint64_t first = std::min(left, first_bytes);
  if (first) out.push_back(first), left -= first;
  while (left) {
    const std::uint64_t b = std::min(left, bucket_bytes);
    out.push_back(b);
    left -= b;
  }
  return out;
}

// ---- helpers ----------------------------------------------------------------------------------
using StatsFn = int (*)(optireduce_process_stats*);

StatsFn find_stats() {
  return reinterpret_cast<StatsFn>(dlsym(RTLD_DEFAULT, "optireduce_get_process_stats"));
}

optireduce_process_stats stats_now(StatsFn fn) {
  optireduce_process_stats s{};
  if (fn) fn(&s);
  return s;
}

std::uint64_t parse_size(const std::string& s) {
  std::size_t pos = 0;
  const double v = std::stod(s, &pos);
  std::string suf = s.substr(pos);
  double mul = 1;
  if (suf == "K" || suf == "k") mul = 1024;
  else if (suf == "M" || suf == "m") mul = 1024.0 * 1024;
  else if (suf == "G" || suf == "g") mul = 1024.0 * 1024 * 1024;
  else if (!suf.empty()) throw std::invalid_argument("bad size suffix in \"" + s + "\"");
  const auto bytes = static_cast<std::uint64_t>(v * mul);
  if (bytes < 4 || bytes % 4) throw std::invalid_argument("size \"" + s + "\" is not a positive multiple of 4 bytes");
  return bytes;
}

double percentile(std::vector<double> v, double p) {  // nearest rank
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  std::size_t k = static_cast<std::size_t>(std::ceil(p / 100.0 * static_cast<double>(v.size())));
  k = std::clamp<std::size_t>(k, 1, v.size());
  return v[k - 1];
}

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

std::string json_array(const std::vector<double>& v, double scale) {
  std::ostringstream o;
  o << "[";
  for (std::size_t i = 0; i < v.size(); ++i) {
    char b[32];
    std::snprintf(b, sizeof b, "%.6g", v[i] * scale);
    o << (i ? ", " : "") << b;
  }
  o << "]";
  return o.str();
}

std::string json_u64s(const std::vector<std::uint64_t>& v) {
  std::ostringstream o;
  o << "[";
  for (std::size_t i = 0; i < v.size(); ++i) o << (i ? ", " : "") << v[i];
  o << "]";
  return o.str();
}

// The window's engine figures summed over ranks (dropped entries / reduced entries).
struct Window {
  bool loaded = false;
  std::uint64_t intercepted = 0, bounded = 0, fallback = 0, entries = 0, dropped = 0;
  std::string json() const {
    if (!loaded) return "null";
    char b[320];
    std::snprintf(b, sizeof b,
                  "{\"engine_calls\": %llu, \"bounded_calls\": %llu, \"fallback_calls\": %llu, "
                  "\"entries_reduced\": %llu, \"entries_dropped\": %llu, \"dropped_fraction\": %.6g}",
                  (unsigned long long)intercepted, (unsigned long long)bounded, (unsigned long long)fallback,
                  (unsigned long long)entries, (unsigned long long)dropped,
                  entries ? static_cast<double>(dropped) / static_cast<double>(entries) : 0.0);
    return b;
  }
};

Window window(StatsFn fn, const optireduce_process_stats& a, const optireduce_process_stats& b) {
  Window w;
  int loaded = fn ? 1 : 0;
  PMPI_Allreduce(MPI_IN_PLACE, &loaded, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
  w.loaded = loaded != 0;
  std::uint64_t d[5] = {b.intercepted_calls - a.intercepted_calls, b.bounded_calls - a.bounded_calls,
                        b.fallback_calls - a.fallback_calls, b.entries_reduced - a.entries_reduced,
                        b.entries_dropped - a.entries_dropped};
  PMPI_Allreduce(MPI_IN_PLACE, d, 5, MPI_UINT64_T, MPI_SUM, MPI_COMM_WORLD);
  w.intercepted = d[0], w.bounded = d[1], w.fallback = d[2], w.entries = d[3], w.dropped = d[4];
  return w;
}

void allreduce(std::vector<float>& buf, std::uint64_t bytes) {
  const int rc = MPI_Allreduce(MPI_IN_PLACE, buf.data(), static_cast<int>(bytes / 4), MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
  if (rc != MPI_SUCCESS) {
    std::fprintf(stderr, "optireduce-itertime: MPI_Allreduce failed (%d)\n", rc);
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
}

void fill(std::vector<float>& buf, int rank) {
  for (std::size_t i = 0; i < buf.size(); ++i) buf[i] = static_cast<float>((i * 7 + rank) % 13) * 0.25f;
}

bool write_file(const std::string& path, const std::string& text) {
  std::ofstream f(path, std::ios::trunc);
  f << text;
  f.close();
  return static_cast<bool>(f);
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{
      "Times float32 MPI_Allreduce(SUM) call by call (latency) or replays a model's data-parallel step "
      "(model) for scripts/compare.sh. Run as is for the MPI library, with LD_PRELOAD=liboptireduce.so "
      "for OptiReduce.",
      "optireduce-itertime"};
  optireduce::tools::add_version_flag(app);
  app.require_subcommand(1);
  std::string json_path, label;
  app.add_option("--json", json_path, "write the figures to this file (rank 0)");
  app.add_option("--label", label, "free text copied into the JSON (e.g. the implementation)");

  auto* lat = app.add_subcommand("latency", "every call timed, max over ranks, all samples written");
  std::string sizes_arg = "1M,4M";
  int iters = 30, warmup = 25;
  lat->add_option("--sizes", sizes_arg, "comma-separated sizes in bytes, suffix K/M/G")->capture_default_str();
  lat->add_option("--iters", iters, "timed calls per size")->check(CLI::Range(1, 1000000))->capture_default_str();
  lat->add_option("--warmup", warmup, "untimed calls per size first (cover the engine's calibration)")
      ->check(CLI::Range(0, 1000000))
      ->capture_default_str();

  auto* mod = app.add_subcommand("model", "replay a model's data-parallel step: sleep, then one allreduce per DDP bucket");
  std::vector<std::string> model_names{"resnet50"};
  std::vector<double> scales{1.0};
  int m_iters = 5, m_warmup_calls = 22, m_warmup_iters = 1;
  double bucket_mb = 25, first_bucket_mb = 1, compute_ms = -1;
  mod->add_option("--model", model_names, "resnet50, bert-large or gpt2; a comma list runs them one after the other")
      ->delimiter(',')
      ->check(CLI::IsMember({"resnet50", "bert-large", "gpt2"}));
  mod->add_option("--iters", m_iters, "timed iterations")->check(CLI::Range(1, 100000))->capture_default_str();
  mod->add_option("--warmup-calls", m_warmup_calls,
                  "untimed allreduces per size class (power-of-two byte range) first: OptiReduce calibrates each class")
      ->check(CLI::Range(0, 100000))
      ->capture_default_str();
  mod->add_option("--warmup-iters", m_warmup_iters, "untimed iterations after that")
      ->check(CLI::Range(0, 100000))
      ->capture_default_str();
  mod->add_option("--bucket-mb", bucket_mb, "DDP bucket_cap_mb (MiB)")->capture_default_str();
  mod->add_option("--first-bucket-mb", first_bucket_mb, "DDP's first bucket (MiB; 0: none)")->capture_default_str();
  mod->add_option("--compute-ms", compute_ms, "compute sleep per step (default: the model's, see the source)");
  mod->add_option("--scale", scales,
                  "replay this fraction of the model: the number of full buckets and the compute sleep are "
                  "multiplied by it (bucket size unchanged), so a heavy model fits a small machine; one value, "
                  "or one per --model")
      ->delimiter(',')
      ->check(CLI::Range(0.001, 1.0));

  CLI11_PARSE(app, argc, argv);

  MPI_Init(&argc, &argv);
  int rank = 0, nranks = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &nranks);
  const StatsFn stats_fn = find_stats();
  std::ostringstream js;
  char b[512];

  if (lat->parsed()) {
    std::vector<std::uint64_t> sizes;
    try {
      std::stringstream ss(sizes_arg);
      std::string item;
      while (std::getline(ss, item, ',')) sizes.push_back(parse_size(item));
    } catch (const std::exception& e) {
      if (rank == 0) std::fprintf(stderr, "optireduce-itertime: --sizes: %s\n", e.what());
      MPI_Finalize();
      return 2;
    }
    const std::uint64_t max_bytes = *std::max_element(sizes.begin(), sizes.end());
    std::vector<float> buf(max_bytes / 4);
    js << "{\"tool\": \"optireduce-itertime\", \"mode\": \"latency\", \"label\": \"" << label << "\", \"ranks\": " << nranks
       << ", \"iters\": " << iters << ", \"warmup\": " << warmup << ", \"optireduce_loaded\": " << (stats_fn ? "true" : "false")
       << ", \"sizes\": [";
    for (std::size_t si = 0; si < sizes.size(); ++si) {
      const std::uint64_t bytes = sizes[si];
      for (int i = 0; i < warmup; ++i) fill(buf, rank), allreduce(buf, bytes);
      const auto before = stats_now(stats_fn);
      std::vector<double> t(iters);
      for (int i = 0; i < iters; ++i) {
        fill(buf, rank);
        PMPI_Barrier(MPI_COMM_WORLD);
        const double t0 = MPI_Wtime();
        allreduce(buf, bytes);
        t[i] = MPI_Wtime() - t0;
      }
      const auto after = stats_now(stats_fn);
      PMPI_Allreduce(MPI_IN_PLACE, t.data(), iters, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
      const Window w = window(stats_fn, before, after);
      std::snprintf(b, sizeof b, "%s\n  {\"bytes\": %llu, \"p50_ms\": %.6g, \"p99_ms\": %.6g, \"engine\": %s, \"samples_ms\": ",
                    si ? "," : "", (unsigned long long)bytes, percentile(t, 50) * 1e3, percentile(t, 99) * 1e3,
                    w.json().c_str());
      js << b << json_array(t, 1e3) << "}";
      if (rank == 0)
        std::fprintf(stderr, "optireduce-itertime: %llu bytes: p50 %.2f ms, p99 %.2f ms\n", (unsigned long long)bytes,
                     percentile(t, 50) * 1e3, percentile(t, 99) * 1e3);
    }
    js << "]}\n";
  } else {
    if (scales.size() != 1 && scales.size() != model_names.size()) {
      if (rank == 0) std::fprintf(stderr, "optireduce-itertime: --scale takes one value or one per --model\n");
      MPI_Finalize();
      return 2;
    }
    js << "{\"tool\": \"optireduce-itertime\", \"mode\": \"model\", \"label\": \"" << label << "\", \"ranks\": " << nranks
       << ", \"runs\": [\n  ";
    for (std::size_t mi = 0; mi < model_names.size(); ++mi) {
      const Model* m = nullptr;
      for (const auto& k : kModels)
        if (model_names[mi] == k.name) m = &k;
      const double scale = scales.size() == 1 ? scales[0] : scales[mi];
      std::vector<std::uint64_t> full = ddp_buckets(m->params, static_cast<std::uint64_t>(bucket_mb * kMiB),
                                                    static_cast<std::uint64_t>(first_bucket_mb * kMiB));
      // Scaled replay: keep the first bucket, keep round(scale x the rest) buckets (at least one),
      // taking the full-size ones first; the compute sleep scales alike.
      std::vector<std::uint64_t> buckets = full;
      if (scale < 1.0) {
        const std::size_t first_n = first_bucket_mb > 0 ? 1 : 0;
        const std::size_t rest = full.size() - first_n;
        const std::size_t keep = std::max<std::size_t>(1, static_cast<std::size_t>(std::lround(scale * static_cast<double>(rest))));
        buckets.assign(full.begin(), full.begin() + static_cast<long>(first_n + std::min(keep, rest)));
      }
      const double compute_s = (compute_ms >= 0 ? compute_ms / 1e3 : m->compute_s) * scale;
      const std::uint64_t max_bytes = *std::max_element(buckets.begin(), buckets.end());
      std::vector<float> buf(max_bytes / 4);
      // Warm-up: --warmup-calls allreduces per size class (power-of-two byte range, the unit in
      // which OptiReduce calibrates its deadlines), cycling through the bucket sizes of the class.
      std::map<int, std::vector<std::uint64_t>> classes;
      for (const auto bytes : buckets) classes[static_cast<int>(std::floor(std::log2(static_cast<double>(bytes))))].push_back(bytes);
      for (const auto& [cls, members] : classes)
        for (int i = 0; i < m_warmup_calls; ++i) fill(buf, rank), allreduce(buf, members[static_cast<std::size_t>(i) % members.size()]);
      auto step = [&](double* comm_s) {
        std::this_thread::sleep_for(std::chrono::duration<double>(compute_s));
        const double c0 = MPI_Wtime();
        for (const auto bytes : buckets) allreduce(buf, bytes);
        *comm_s = MPI_Wtime() - c0;
      };
      double dummy = 0;
      for (int i = 0; i < m_warmup_iters; ++i) step(&dummy);
      const auto before = stats_now(stats_fn);
      std::vector<double> it(m_iters), comm(m_iters);
      for (int i = 0; i < m_iters; ++i) {
        PMPI_Barrier(MPI_COMM_WORLD);
        const double t0 = MPI_Wtime();
        step(&comm[i]);
        it[i] = MPI_Wtime() - t0;
      }
      const auto after = stats_now(stats_fn);
      PMPI_Allreduce(MPI_IN_PLACE, it.data(), m_iters, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
      PMPI_Allreduce(MPI_IN_PLACE, comm.data(), m_iters, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
      const Window w = window(stats_fn, before, after);
      std::uint64_t total = 0;
      for (auto x : buckets) total += x;
      js << (mi ? ",\n  " : "") << "{\"model\": \"" << m->name << "\", \"params\": " << m->params << ", \"scale\": " << scale
         << ", \"full_bucket_count\": " << full.size() << ", \"buckets_bytes\": " << json_u64s(buckets)
         << ", \"replayed_bytes\": " << total << ", \"compute_s\": " << compute_s << ", \"iters\": " << m_iters
         << ", \"optireduce_loaded\": " << (stats_fn ? "true" : "false");
      std::snprintf(b, sizeof b, ", \"s_per_iter_median\": %.6g, \"s_per_iter_p99\": %.6g, \"comm_s_median\": %.6g, \"engine\": %s",
                    median(it), percentile(it, 99), median(comm), w.json().c_str());
      js << b << ", \"s_per_iter\": " << json_array(it, 1) << ", \"comm_s\": " << json_array(comm, 1) << "}";
      if (rank == 0)
        std::fprintf(stderr, "optireduce-itertime: %s (scale %g, %zu buckets, compute %.3f s): %.3f s/iteration (median of %d)\n",
                     m->name, scale, buckets.size(), compute_s, median(it), m_iters);
    }
    js << "]}\n";
  }

  int rc = 0;
  if (rank == 0 && !json_path.empty() && !write_file(json_path, js.str())) {
    std::fprintf(stderr, "optireduce-itertime: cannot write %s\n", json_path.c_str());
    rc = 1;
  }
  MPI_Finalize();
  return rc;
}
