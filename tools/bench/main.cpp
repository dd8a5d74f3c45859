// optireduce-bench: times a sum the way a user's job calls it (float32 MPI_Allreduce by default;
// --format bf16/fp16 with Horovod's datatype and op, --collective reduce_scatter_block:
// reduction.hpp) and checks every result against the exact sum (inputs.hpp).
//
// A plain MPI program, not linked to OptiReduce: run it as is to measure the MPI library, with
// LD_PRELOAD=liboptireduce.so (or under optireduce-run) to measure the engine. Each contender thus
// runs in processes of its own, as a user's job does; comparing contenders (alternating runs,
// medians, ratios) is scripts/bench.sh's job. (Timing the MPI and the engine interleaved inside one
// process hid a 2x gap: docs/benchmarks.md.)
//
//   latency: every call of each size timed one by one after a barrier (the default)
//   sweep:   latency over sizes from --min to --max, each --factor times the one before
//   step:    a data-parallel step: one buffer per bucket, each reduced in place, in reverse order of
//            the list (DDP reduces the last layers' gradients first), back to back; the step timed
//   model:   a model's step replayed: a compute sleep, then its DDP buckets as in step (models.hpp)
//
// A timed iteration lasts until its slowest rank is done: the max over ranks is recorded. The
// barrier before it is the MPI's (--barrier mpi) or one in the host's shared memory (--barrier
// host, host_barrier.hpp), which sends nothing over the network being measured. Warm-up
// iterations are run, checked and recorded but excluded from p50/p99. When the library is loaded,
// the kind of every call (none, exact, calibration, bounded, fallback) and its dropped entries come
// from its C API (engine_probe.hpp).
//
// Exit code: 0; 3 when a call failed or returned a wrong result (a call that must be exact is not
// exact, or a bounded call that reports no dropped entry is off by more than --tolerance); 2 on bad
// usage. The JSON is written in every case.
//
//   mpirun -np 4 optireduce-bench latency --sizes 1M,16M --warmup 30 --iters 50 --json out.json
//   mpirun -np 4 optireduce-bench latency --counts 4M --format fp16 --collective reduce_scatter_block
//   mpirun -np 4 optireduce-bench step --buckets 0.25M,6.25M,6.25M,6.25M,5.5M --json out.json
//   mpirun -np 4 optireduce-bench model --model resnet50 --iters 5
#include <mpi.h>
#include <sys/resource.h>

#include <CLI/CLI.hpp>
#include <cinttypes>
#include <cstdio>
#include <fstream>
#include <optional>

#include "../cli_errors.hpp"
#include "json.hpp"
#include "models.hpp"
#include "runner.hpp"

namespace {

using namespace optireduce::bench;

double peak_rss_mib() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return static_cast<double>(usage.ru_maxrss) / 1024.0;  // KiB on Linux
}

// Parses the command line into opt (entries included). Returns -1 to go on, else the exit code.
int parse(int argc, char** argv, Options& opt) {
  CLI::App app{
      "Times a sum (float32 MPI_Allreduce by default) as a user's job calls it and checks every result against the "
      "exact sum. "
      "One contender per run: as is for the MPI library, with LD_PRELOAD=liboptireduce.so for OptiReduce "
      "(scripts/bench.sh compares them).",
      "optireduce-bench"};
  optireduce::tools::add_version_flag(app);
  app.require_subcommand(0, 1);
  std::string sizes = "1M,4M,16M", counts, buckets, barrier = "mpi", format = "f32", collective = "allreduce";
  int warmup = -1, iters = -1, warmup_calls = -1;
  bool no_check = false;
  // One set of flags, before or after the subcommand.
  app.add_option("--sizes", sizes, "latency: sizes in bytes, comma-separated, K/M/G = KiB/MiB/GiB, decimals allowed")
      ->capture_default_str();
  app.add_option("--counts", counts,
                 "latency: sizes in elements per rank in (instead of --sizes), comma-separated, K/M/G = 2^10/2^20/2^30; "
                 "entries are named \"<count>-elements\", so runs of different formats compare");
  app.add_option("--format", format,
                 "element format: f32 (MPI_FLOAT, MPI_SUM) or bf16/fp16 (MPI_Type_contiguous(2, MPI_BYTE) and an "
                 "MPI_Op_create sum: Horovod's recipe); --sizes and --buckets stay in bytes")
      ->check(CLI::IsMember({"f32", "bf16", "fp16"}))
      ->capture_default_str();
  app.add_option("--collective", collective,
                 "allreduce (MPI_Allreduce) or reduce_scatter_block (MPI_Reduce_scatter_block: each rank gets 1/ranks "
                 "of the elements in, checked against its block of the sum)")
      ->check(CLI::IsMember({"allreduce", "reduce_scatter_block"}))
      ->capture_default_str();
  app.add_option("--warmup", warmup,
                 "untimed iterations first (calls, or steps): they cover calibration (default 30 calls, 10 steps, "
                 "1 model step)")
      ->check(CLI::Range(0, 1000000));
  app.add_option("--iters", iters, "timed iterations (calls, or steps; default 50 calls, 30 steps, 5 model steps)")
      ->check(CLI::Range(1, 1000000));
  app.add_option("--warmup-calls", warmup_calls,
                 "untimed calls per size class (power-of-two byte range) before the warm-up iterations: the engine "
                 "calibrates each class (default 22 for model, else 0)")
      ->check(CLI::Range(0, 1000000));
  app.add_flag("--no-check", no_check, "do not check results against the exact sum (failed calls still count)");
  app.add_option("--tolerance", opt.tolerance,
                 "largest relative RMS error of a bounded call that reports no dropped entry (Hadamard rounding)")
      ->check(CLI::Range(0.0, 1e9))
      ->capture_default_str();
  app.add_flag("--in-place", opt.in_place, "latency, sweep: MPI_IN_PLACE instead of separate buffers (steps always are)");
  app.add_option("--barrier", barrier,
                 "what starts each iteration: mpi (MPI_Barrier) or host (shared memory of one host: sends nothing over "
                 "the network being measured; every rank on one host)")
      ->check(CLI::IsMember({"mpi", "host"}))
      ->capture_default_str();
  app.add_option("--json", opt.json_path, "write the figures and every call to this file (rank 0)");
  app.add_option("--label", opt.label, "free text copied into the JSON (the contender's name)");
  app.add_option("--corrupt-result", opt.corrupt_call,
                 "testing: add 1 to one entry of the result of this call (counted from 1) on rank 0, to prove the "
                 "check fails");
  auto* lat = app.add_subcommand("latency", "every call of each size (--sizes) timed one by one after a barrier");
  auto* sweep = app.add_subcommand("sweep", "latency over sizes from --min to --max, --factor apart");
  std::string from = "4K", to = "64M";
  double factor = 2;
  sweep->add_option("--min", from, "smallest size")->capture_default_str();
  sweep->add_option("--max", to, "largest size")->capture_default_str();
  sweep->add_option("--factor", factor, "each size this many times the one before")->capture_default_str();
  auto* step = app.add_subcommand("step", "a data-parallel step: one in-place buffer per bucket, reduced in reverse order");
  step->add_option("--buckets", buckets, "bucket sizes, comma-separated, in model order (K/M/G, decimals allowed)")
      ->required();
  auto* model = app.add_subcommand("model", "a model's step replayed: a compute sleep, then one allreduce per DDP bucket");
  std::vector<std::string> models{"resnet50"};
  std::vector<double> scales{1.0};
  double bucket_mib = 25, first_bucket_mib = 1, compute_ms = -1;
  model->add_option("--model", models, "resnet50, bert-large or gpt2; a comma list runs them one after the other")
      ->delimiter(',')
      ->check(CLI::IsMember({"resnet50", "bert-large", "gpt2"}))
      ->capture_default_str();
  model->add_option("--scale", scales,
                    "replay this fraction of the model: its number of full buckets and its compute sleep times this "
                    "(bucket size unchanged); one value, or one per --model")
      ->delimiter(',')
      ->check(CLI::Range(0.001, 1.0));
  model->add_option("--bucket-mb", bucket_mib, "DDP bucket_cap_mb (MiB)")->capture_default_str();
  model->add_option("--first-bucket-mb", first_bucket_mib, "DDP's first bucket (MiB; 0: none)")->capture_default_str();
  model->add_option("--compute-ms", compute_ms, "compute sleep per step (default: the model's, see models.hpp)");
  for (auto* sub : {lat, sweep, step, model}) sub->fallthrough();
  optireduce::tools::use_single_line_errors(app);
  try {
    app.parse(argc, argv);
    opt.mode = sweep->parsed() ? "sweep" : step->parsed() ? "step" : model->parsed() ? "model" : "latency";
    const bool steps = opt.mode == "step" || opt.mode == "model";
    if ((app.count("--sizes") || app.count("--counts")) && opt.mode != "latency")
      throw CLI::ValidationError("--sizes", "goes with latency only (sweep takes --min and --max, step --buckets, model --model)");
    if (app.count("--sizes") && app.count("--counts"))
      throw CLI::ValidationError("--counts", "replaces --sizes: give one of them");
    opt.format = parse_format(format);
    opt.collective = parse_collective(collective);
    opt.warmup = warmup >= 0 ? warmup : opt.mode == "model" ? 1 : steps ? 10 : 30;
    opt.iters = iters >= 0 ? iters : opt.mode == "model" ? 5 : steps ? 30 : 50;
    warmup_calls = warmup_calls >= 0 ? warmup_calls : opt.mode == "model" ? 22 : 0;
    opt.check = !no_check;
    opt.host_barrier = barrier == "host";
    if (steps) opt.in_place = true;
    if (opt.mode == "model") {
      if (scales.size() != 1 && scales.size() != models.size())
        throw CLI::ValidationError("--scale", "takes one value or one per --model");
      for (std::size_t i = 0; i < models.size(); ++i)
        opt.entries.push_back(model_entry(*find_model(models[i]), scales.size() == 1 ? scales[0] : scales[i],
                                          bucket_mib, first_bucket_mib, compute_ms));
    } else if (opt.mode == "step") {
      opt.entries.push_back(named_entry("step", parse_sizes(buckets)));
    } else if (!counts.empty()) {
      const std::uint64_t elem = opt.format == Format::f32 ? 4 : 2;
      for (auto count : parse_sizes(counts)) opt.entries.push_back(named_entry(size_name(count) + "-elements", {count * elem}));
    } else {
      const auto list = opt.mode == "sweep" ? sweep_sizes(parse_size(from), parse_size(to), factor) : parse_sizes(sizes);
      for (auto bytes : list) opt.entries.push_back(named_entry(size_name(bytes), {bytes}));
    }
    for (auto& e : opt.entries) e.warmup_calls = warmup_calls;
  } catch (const CLI::ParseError& e) {
    return optireduce::tools::exit_code(app, e, true);
  } catch (const std::invalid_argument& e) {
    std::fprintf(stderr, "optireduce-bench: error: %s (see --help)\n", e.what());
    return 2;
  }
  return -1;
}

}  // namespace

int main(int argc, char** argv) {
  Options opt;
  if (const int rc = parse(argc, argv, opt); rc >= 0) return rc;

  MPI_Init(&argc, &argv);
  // A failed call is counted and reported with the others instead of ending the job at once.
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  std::optional<Runner> made;
  try {
    made.emplace(opt, MPI_COMM_WORLD);
  } catch (const std::exception& e) {
    int rank = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    if (rank == 0) std::fprintf(stderr, "optireduce-bench: error: %s\n", e.what());
    MPI_Finalize();
    return 2;
  }
  Runner& runner = *made;
  const bool root = runner.rank() == 0;
  std::vector<EntryResult> results;
  bool failed = false;
  for (const auto& entry : opt.entries) {
    results.push_back(runner.run(entry));
    const auto& r = results.back();
    failed = failed || r.failed;
    if (!root) continue;
    const auto t = timed(r.iteration_ms, opt);
    std::uint64_t engine_calls = 0;
    for (int k : r.kind) engine_calls += k != kNone;
    std::printf("optireduce-bench: %s%s%s: p50 %.3f ms, p99 %.3f ms over %d timed %s; %" PRIu64 " of %zu calls by the "
                "engine%s\n",
                opt.label.c_str(), opt.label.empty() ? "" : " ", r.entry.name.c_str(), percentile(t, 50),
                percentile(t, 99), opt.iters, r.calls_per_iteration > 1 ? "steps" : "calls", engine_calls,
                r.kind.size(), r.failed ? " (WRONG RESULTS)" : "");
    std::fflush(stdout);
  }
  double rss = peak_rss_mib();
  PMPI_Allreduce(MPI_IN_PLACE, &rss, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
  const std::string json = run_json(opt, runner.nranks(), runner.probe(), rss, results);

  int rc = failed ? 3 : 0;
  if (root && !opt.json_path.empty()) {
    std::ofstream f(opt.json_path, std::ios::trunc);
    f << json;
    f.close();
    if (!f) {
      std::fprintf(stderr, "optireduce-bench: error: cannot write %s\n", opt.json_path.c_str());
      rc = rc ? rc : 1;
    }
  }
  if (root && failed) std::fprintf(stderr, "optireduce-bench: error: some calls returned wrong results\n");
  MPI_Finalize();
  return rc;
}
