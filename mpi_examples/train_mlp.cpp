// A data-parallel training job that knows nothing about OptiReduce: a 784-H-10 MLP (H = 512 by
// default) learns Fashion-MNIST (or, without --data, a synthetic 10-class problem made from fixed
// seeds); every rank computes gradients on its own samples, and one
// MPI_Allreduce(MPI_IN_PLACE, MPI_FLOAT, MPI_SUM) per step averages them (407,050 floats, 1.6 MB at
// H = 512: large enough for the engine when the library is preloaded). Plain MPI calls only.
//
//   mpirun -np 4 train_mlp [steps=150] [batch_per_rank=32]                      synthetic data
//   mpirun -np 4 train_mlp --data /usr/share/datasets/fashion-mnist [options]   Fashion-MNIST
//
// Options: --steps N, --batch N (per rank), --hidden N, --lr F, --momentum F, --seed N,
// --eval-every N (steps between test evaluations, not counted as training time), --target PCT,
// --train-limit N, --test-limit N, --json FILE (rank 0 writes one JSON object per line, the same
// records as mpi_examples/train_torch.py), --label TEXT, --check (exit 1 unless the test accuracy
// ends above --min-accuracy PCT, default 30, and the training loss went down), --expect-identical
// (exit 1 if the replicas' parameters differ at the end).
//
// Fashion-MNIST: the IDX files of Debian's dataset-fashion-mnist, gzip-compressed (read through
// `gzip -dc`) or raw. Each step every rank takes its own `batch` samples of one permutation of the
// training set that all ranks draw from the same seed. If liboptireduce.so is preloaded, the job
// also reads its counters through the C API (looked up with dlsym, never linked) to record the
// share of gradient entries the library had to estimate.
#include <dlfcn.h>
#include <mpi.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "optireduce/optireduce.h"

namespace {

constexpr int kIn = 784, kOut = 10;
constexpr int kTrainPerRank = 4096, kTest = 2048;  // synthetic data
constexpr float kSignal = 0.1f;  // synthetic prototype scale against unit noise: separable, but not at once
constexpr float kMean = 0.2860f, kStd = 0.3530f;  // Fashion-MNIST training set, pixels in [0, 1]

struct Options {
  int steps = 150, batch = 32, hidden = 512, eval_every = 25, seed = 1;
  int train_limit = 0, test_limit = 0;
  float lr = 0.02f, momentum = 0.9f;
  double target = 80.0, min_accuracy = 30.0;
  std::string data, json, label;
  bool check = false, expect_identical = false;
};

// Samples are either float vectors (synthetic) or uint8 images standardised when read.
struct Dataset {
  std::vector<float> x;        // synthetic: n * kIn
  std::vector<uint8_t> pixels;  // Fashion-MNIST: n * kIn
  std::vector<int> y;
  int n = 0;
  const float* sample(int i, float* scratch) const {
    if (pixels.empty()) return &x[static_cast<std::size_t>(i) * kIn];
    const uint8_t* p = &pixels[static_cast<std::size_t>(i) * kIn];
    for (int k = 0; k < kIn; ++k) scratch[k] = (p[k] * (1.0f / 255.0f) - kMean) * (1.0f / kStd);
    return scratch;
  }
};

// --- synthetic data: class prototypes shared by all ranks (same seed), samples are noisy copies ---
std::vector<float> make_prototypes() {
  std::mt19937 gen(42);
  std::normal_distribution<float> normal;
  std::vector<float> p(kOut * kIn);
  for (auto& v : p) v = normal(gen);
  return p;
}

Dataset make_dataset(const std::vector<float>& prototypes, int n, unsigned seed) {
  std::mt19937 gen(seed);
  std::normal_distribution<float> normal;
  std::uniform_int_distribution<int> label(0, kOut - 1);
  Dataset d;
  d.n = n;
  d.x.resize(static_cast<std::size_t>(n) * kIn);
  d.y.resize(n);
  for (int i = 0; i < n; ++i) {
    d.y[i] = label(gen);
    const float* proto = &prototypes[static_cast<std::size_t>(d.y[i]) * kIn];
    for (int k = 0; k < kIn; ++k) d.x[static_cast<std::size_t>(i) * kIn + k] = kSignal * proto[k] + normal(gen);
  }
  return d;
}

// --- Fashion-MNIST IDX files ---------------------------------------------------------------------
// The bytes of dir/stem.gz (through gzip -dc) or dir/stem; empty with a message on failure.
std::vector<uint8_t> read_file(const std::string& dir, const std::string& stem) {
  std::vector<uint8_t> bytes;
  const std::string gz = dir + "/" + stem + ".gz", raw = dir + "/" + stem;
  FILE* f = nullptr;
  bool piped = false;
  if (FILE* probe = std::fopen(gz.c_str(), "rb")) {
    std::fclose(probe);
    f = popen(("gzip -dc '" + gz + "'").c_str(), "r");
    piped = true;
  } else {
    f = std::fopen(raw.c_str(), "rb");
  }
  if (!f) {
    std::fprintf(stderr, "train_mlp: cannot read %s[.gz]\n", raw.c_str());
    return bytes;
  }
  uint8_t buf[1 << 16];
  std::size_t got;
  while ((got = std::fread(buf, 1, sizeof buf, f)) > 0) bytes.insert(bytes.end(), buf, buf + got);
  if ((piped ? pclose(f) : std::fclose(f)) != 0) {
    std::fprintf(stderr, "train_mlp: reading %s[.gz] failed\n", raw.c_str());
    bytes.clear();
  }
  return bytes;
}

// IDX: two zero bytes, type 0x08 (unsigned byte), the number of dimensions, big-endian sizes.
bool parse_idx(const std::vector<uint8_t>& b, int ndim, std::vector<uint32_t>& dims, std::size_t& offset) {
  if (b.size() < 4 || b[0] != 0 || b[1] != 0 || b[2] != 0x08 || b[3] != ndim) return false;
  offset = 4 + 4 * static_cast<std::size_t>(ndim);
  if (b.size() < offset) return false;
  dims.assign(ndim, 0);
  std::size_t total = 1;
  for (int d = 0; d < ndim; ++d) {
    const uint8_t* p = &b[4 + 4 * d];
    dims[d] = (uint32_t{p[0]} << 24) | (uint32_t{p[1]} << 16) | (uint32_t{p[2]} << 8) | p[3];
    total *= dims[d];
  }
  return b.size() - offset == total;
}

bool load_fashion(const std::string& dir, const char* images, const char* labels, int limit, Dataset& d) {
  const auto img = read_file(dir, images), lab = read_file(dir, labels);
  std::vector<uint32_t> di, dl;
  std::size_t oi = 0, ol = 0;
  if (!parse_idx(img, 3, di, oi) || !parse_idx(lab, 1, dl, ol) || di[0] != dl[0] || di[1] * di[2] != kIn) {
    std::fprintf(stderr, "train_mlp: %s/%s and %s are not matching 28x28 IDX image and label files\n", dir.c_str(),
                 images, labels);
    return false;
  }
  d.n = static_cast<int>(di[0]);
  if (limit > 0) d.n = std::min(d.n, limit);
  d.pixels.assign(img.begin() + static_cast<std::ptrdiff_t>(oi),
                  img.begin() + static_cast<std::ptrdiff_t>(oi + static_cast<std::size_t>(d.n) * kIn));
  d.y.assign(lab.begin() + static_cast<std::ptrdiff_t>(ol), lab.begin() + static_cast<std::ptrdiff_t>(ol + d.n));
  return true;
}

// --- the model: all parameters in one flat buffer, so the gradient is reduced in one call ---------
struct Model {
  int h;
  std::size_t w1, b1, w2, b2, size;
  std::vector<float> p;
  explicit Model(int hidden)
      : h(hidden), w1(0), b1(w1 + std::size_t(hidden) * kIn), w2(b1 + hidden), b2(w2 + std::size_t(kOut) * hidden),
        size(b2 + kOut), p(size) {}
};

void init_model(Model& m, int seed) {
  std::mt19937 gen(7 + seed - 1);
  std::normal_distribution<float> normal;
  for (std::size_t i = 0; i < std::size_t(m.h) * kIn; ++i) m.p[m.w1 + i] = normal(gen) * std::sqrt(2.0f / kIn);
  for (std::size_t i = 0; i < std::size_t(kOut) * m.h; ++i) m.p[m.w2 + i] = normal(gen) * std::sqrt(1.0f / m.h);
}

// Forward one sample; the class probabilities in `prob`, the hidden activations in `h`.
void forward(const Model& m, const float* x, float* h, float* prob) {
  for (int j = 0; j < m.h; ++j) {
    const float* w = &m.p[m.w1 + std::size_t(j) * kIn];
    float s = m.p[m.b1 + j];
    for (int k = 0; k < kIn; ++k) s += w[k] * x[k];
    h[j] = s > 0 ? s : 0;
  }
  float top = -INFINITY;
  for (int c = 0; c < kOut; ++c) {
    const float* w = &m.p[m.w2 + std::size_t(c) * m.h];
    float s = m.p[m.b2 + c];
    for (int j = 0; j < m.h; ++j) s += w[j] * h[j];
    prob[c] = s;
    top = std::max(top, s);
  }
  float sum = 0;
  for (int c = 0; c < kOut; ++c) sum += prob[c] = std::exp(prob[c] - top);
  for (int c = 0; c < kOut; ++c) prob[c] /= sum;
}

int argmax(const float* v) { return static_cast<int>(std::max_element(v, v + kOut) - v); }

struct BatchResult {
  double loss = 0;
  int correct = 0;
};

// Sets `grad` (same layout as the model) to the mean cross-entropy gradient over the samples.
BatchResult backward_batch(const Model& m, const Dataset& d, const int* samples, int batch, std::vector<float>& grad) {
  std::fill(grad.begin(), grad.end(), 0.0f);
  std::vector<float> h(m.h), dh(m.h), prob(kOut), scratch(kIn);
  BatchResult r;
  const float scale = 1.0f / static_cast<float>(batch);
  for (int b = 0; b < batch; ++b) {
    const int i = samples[b];
    const float* x = d.sample(i, scratch.data());
    forward(m, x, h.data(), prob.data());
    r.loss -= std::log(std::max(prob[d.y[i]], 1e-12f));
    r.correct += argmax(prob.data()) == d.y[i];
    std::fill(dh.begin(), dh.end(), 0.0f);
    for (int c = 0; c < kOut; ++c) {
      const float dz = (prob[c] - (c == d.y[i] ? 1.0f : 0.0f)) * scale;
      float* gw = &grad[m.w2 + std::size_t(c) * m.h];
      const float* w = &m.p[m.w2 + std::size_t(c) * m.h];
      for (int j = 0; j < m.h; ++j) {
        gw[j] += dz * h[j];
        dh[j] += dz * w[j];
      }
      grad[m.b2 + c] += dz;
    }
    for (int j = 0; j < m.h; ++j) {
      if (h[j] <= 0) continue;  // ReLU: no gradient through an inactive unit
      float* gw = &grad[m.w1 + std::size_t(j) * kIn];
      for (int k = 0; k < kIn; ++k) gw[k] += dh[j] * x[k];
      grad[m.b1 + j] += dh[j];
    }
  }
  return r;
}

// Test accuracy (percent) and mean loss over the whole test set; each rank takes a strided slice.
void evaluate(const Model& m, const Dataset& test, int rank, int size, double& accuracy, double& loss) {
  std::vector<float> h(m.h), prob(kOut), scratch(kIn);
  double figures[3] = {0, 0, 0};  // correct, seen, loss sum
  for (int i = rank; i < test.n; i += size) {
    forward(m, test.sample(i, scratch.data()), h.data(), prob.data());
    figures[0] += argmax(prob.data()) == test.y[i];
    figures[1] += 1;
    figures[2] -= std::log(std::max(prob[test.y[i]], 1e-12f));
  }
  MPI_Allreduce(MPI_IN_PLACE, figures, 3, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
  accuracy = 100.0 * figures[0] / figures[1];
  loss = figures[2] / figures[1];
}

// OptiReduce's counters when the library is preloaded (dlsym: the job never links it).
using GetStats = int (*)(optireduce_process_stats*);
GetStats library_stats() { return reinterpret_cast<GetStats>(dlsym(RTLD_DEFAULT, "optireduce_get_process_stats")); }

bool parse_int(const char* text, int& out, long low = 1) {
  char* end = nullptr;
  const long v = std::strtol(text, &end, 10);
  if (end == text || *end != '\0' || v < low || v > 100000000) return false;
  out = static_cast<int>(v);
  return true;
}

bool parse_real(const char* text, double& out) {
  char* end = nullptr;
  out = std::strtod(text, &end);
  return end != text && *end == '\0' && std::isfinite(out) && out >= 0;
}

bool parse_options(int argc, char** argv, Options& o) {
  int i = 1;
  // The historical form: [steps [batch_per_rank]].
  if (i < argc && argv[i][0] != '-') {
    if (!parse_int(argv[i++], o.steps)) return false;
    if (i < argc && argv[i][0] != '-' && !parse_int(argv[i++], o.batch)) return false;
  }
  for (; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--check") { o.check = true; continue; }
    if (a == "--expect-identical") { o.expect_identical = true; continue; }
    if (i + 1 >= argc) return false;
    const char* v = argv[++i];
    double real = 0;
    bool ok = true;
    if (a == "--steps") ok = parse_int(v, o.steps);
    else if (a == "--batch") ok = parse_int(v, o.batch);
    else if (a == "--hidden") ok = parse_int(v, o.hidden);
    else if (a == "--eval-every") ok = parse_int(v, o.eval_every);
    else if (a == "--seed") ok = parse_int(v, o.seed);
    else if (a == "--train-limit") ok = parse_int(v, o.train_limit, 0);
    else if (a == "--test-limit") ok = parse_int(v, o.test_limit, 0);
    else if (a == "--lr") ok = parse_real(v, real) && (o.lr = static_cast<float>(real)) > 0;
    else if (a == "--momentum") ok = parse_real(v, real) && (o.momentum = static_cast<float>(real)) < 1;
    else if (a == "--target") ok = parse_real(v, o.target);
    else if (a == "--min-accuracy") ok = parse_real(v, o.min_accuracy);
    else if (a == "--data") o.data = v;
    else if (a == "--json") o.json = v;
    else if (a == "--label") o.label = v;
    else ok = false;
    if (!ok) return false;
  }
  return true;
}

std::string json_number(double v) {
  if (!std::isfinite(v)) return "null";
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.9g", v);
  return buf;
}

std::string json_string(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    if (static_cast<unsigned char>(c) >= 0x20) out += c;
  }
  return out + "\"";
}

double percentile(std::vector<double> v, double q) {
  if (v.empty()) return NAN;
  std::sort(v.begin(), v.end());
  const auto k = static_cast<std::size_t>(std::ceil(q / 100 * static_cast<double>(v.size())));
  return v[std::min(v.size() - 1, k > 0 ? k - 1 : 0)];
}

}  // namespace

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank = 0, size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);

  Options opt;
  if (!parse_options(argc, argv, opt)) {
    if (rank == 0)
      std::fprintf(stderr,
                   "train_mlp: usage: train_mlp [steps [batch_per_rank]] [--data DIR] [--steps N] [--batch N] "
                   "[--hidden N] [--lr F] [--momentum F] [--seed N] [--eval-every N] [--target PCT] "
                   "[--train-limit N] [--test-limit N] [--json FILE] [--label TEXT] [--check] "
                   "[--min-accuracy PCT] [--expect-identical]\n");
    MPI_Finalize();
    return 2;
  }

  Dataset train, test;
  const bool fashion = !opt.data.empty();
  if (fashion) {
    int ok = load_fashion(opt.data, "train-images-idx3-ubyte", "train-labels-idx1-ubyte", opt.train_limit, train) &&
             load_fashion(opt.data, "t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte", opt.test_limit, test);
    MPI_Allreduce(MPI_IN_PLACE, &ok, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    if (!ok) {
      MPI_Finalize();
      return 77;  // the data set is not installed: a test skips
    }
  } else {
    const auto prototypes = make_prototypes();
    train = make_dataset(prototypes, kTrainPerRank, 1000u + static_cast<unsigned>(rank));
    test = make_dataset(prototypes, kTest, 99u);
  }
  const int global_batch = opt.batch * size;
  if (fashion && train.n < global_batch) {
    if (rank == 0) std::fprintf(stderr, "train_mlp: the training set is smaller than one global batch\n");
    MPI_Finalize();
    return 2;
  }

  Model model(opt.hidden);
  if (rank == 0) init_model(model, opt.seed);
  // A real job starts every replica from rank 0's weights.
  MPI_Bcast(model.p.data(), static_cast<int>(model.size), MPI_FLOAT, 0, MPI_COMM_WORLD);
  const GetStats get_stats = library_stats();

  FILE* json = nullptr;
  if (rank == 0 && !opt.json.empty() && !(json = std::fopen(opt.json.c_str(), "w")))
    std::fprintf(stderr, "train_mlp: cannot write %s\n", opt.json.c_str());
  if (json) {
    std::fprintf(json,
                 "{\"event\": \"start\", \"trainer\": \"cpp\", \"backend\": \"mpi\", \"model\": \"mlp\", \"hidden\": %d, "
                 "\"ranks\": %d, \"parameters\": %zu, \"gradient_bytes\": %zu, \"batch_per_rank\": %d, \"steps\": %d, "
                 "\"lr\": %s, \"momentum\": %s, \"seed\": %d, \"eval_every\": %d, \"target\": %s, \"label\": %s, "
                 "\"data\": %s, \"train_samples\": %d, \"test_samples\": %d, \"library\": %s}\n",
                 opt.hidden, size, model.size, model.size * sizeof(float), opt.batch, opt.steps,
                 json_number(opt.lr).c_str(), json_number(opt.momentum).c_str(), opt.seed, opt.eval_every,
                 json_number(opt.target).c_str(), json_string(opt.label).c_str(),
                 json_string(fashion ? opt.data : "synthetic").c_str(), train.n, test.n, get_stats ? "true" : "false");
    std::fflush(json);
  }
  if (rank == 0)
    std::printf("train_mlp: %d ranks, %zu parameters (%.2f MB gradient per step), %d steps, batch %d per rank, %s%s\n",
                size, model.size, model.size * sizeof(float) / 1e6, opt.steps, opt.batch,
                fashion ? "Fashion-MNIST" : "synthetic data", get_stats ? ", OptiReduce preloaded" : "");

  std::vector<float> grad(model.size), velocity(model.size, 0.0f);
  std::vector<int> order(train.n), samples(opt.batch);
  std::iota(order.begin(), order.end(), 0);
  const int per_epoch = fashion ? train.n / global_batch : 0;
  double train_time = 0, comm_time = 0, loss_sum = 0, first_loss = NAN, last_loss = NAN;
  double accuracy = NAN, test_loss = NAN, time_to_target = NAN;
  int steps_to_target = 0, loss_count = 0;
  double last_lib[2] = {0, 0};  // entries reduced, dropped (all ranks) at the previous evaluation
  std::vector<double> step_times, comm_times;
  const double wall_start = MPI_Wtime();
  for (int step = 1; step <= opt.steps; ++step) {
    if (fashion) {
      const int epoch = (step - 1) / per_epoch, index = (step - 1) % per_epoch;
      if (index == 0) {  // one shared permutation per epoch, the same on every rank
        std::iota(order.begin(), order.end(), 0);
        std::mt19937 gen(static_cast<unsigned>(opt.seed) * 1000003u + static_cast<unsigned>(epoch));
        std::shuffle(order.begin(), order.end(), gen);
      }
      for (int b = 0; b < opt.batch; ++b) samples[b] = order[index * global_batch + rank * opt.batch + b];
    } else {  // synthetic: each rank walks its own data set
      for (int b = 0; b < opt.batch; ++b) samples[b] = ((step - 1) * opt.batch + b) % train.n;
    }

    const double t0 = MPI_Wtime();
    const BatchResult r = backward_batch(model, train, samples.data(), opt.batch, grad);
    // The one call that matters: average the gradients of all replicas.
    const double t1 = MPI_Wtime();
    MPI_Allreduce(MPI_IN_PLACE, grad.data(), static_cast<int>(grad.size()), MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    const double t2 = MPI_Wtime();
    for (std::size_t i = 0; i < grad.size(); ++i) {
      velocity[i] = opt.momentum * velocity[i] + grad[i] / static_cast<float>(size);
      model.p[i] -= opt.lr * velocity[i];
    }
    const double t3 = MPI_Wtime();
    train_time += t3 - t0;
    comm_time += t2 - t1;
    step_times.push_back(t3 - t0);
    comm_times.push_back(t2 - t1);
    loss_sum += r.loss / opt.batch;
    ++loss_count;

    if (step % opt.eval_every == 0 || step == opt.steps) {
      evaluate(model, test, rank, size, accuracy, test_loss);
      optireduce_process_stats stats{};
      const bool have = get_stats && get_stats(&stats) == 0;
      double figures[7] = {loss_sum, static_cast<double>(loss_count), have ? double(stats.entries_reduced) : 0.0,
                           have ? double(stats.entries_dropped) : 0.0, have ? double(stats.intercepted_calls) : 0.0,
                           have ? double(stats.bounded_calls) : 0.0, have ? double(stats.fallback_calls) : 0.0};
      MPI_Allreduce(MPI_IN_PLACE, figures, 7, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
      const double train_loss = figures[0] / figures[1];
      const double d_reduced = figures[2] - last_lib[0], d_dropped = figures[3] - last_lib[1];
      const double dropped = get_stats ? (d_reduced > 0 ? d_dropped / d_reduced : 0.0) : NAN;
      last_lib[0] = figures[2];
      last_lib[1] = figures[3];
      if (std::isnan(first_loss)) first_loss = train_loss;
      last_loss = train_loss;
      loss_sum = 0;
      loss_count = 0;
      if (std::isnan(time_to_target) && accuracy >= opt.target) {
        time_to_target = train_time;
        steps_to_target = step;
      }
      if (json) {
        std::fprintf(json,
                     "{\"event\": \"eval\", \"step\": %d, \"train_time\": %s, \"comm_time\": %s, \"wall\": %s, "
                     "\"accuracy\": %s, \"test_loss\": %s, \"train_loss\": %s, \"dropped_fraction\": %s",
                     step, json_number(train_time).c_str(), json_number(comm_time).c_str(),
                     json_number(MPI_Wtime() - wall_start).c_str(), json_number(accuracy).c_str(),
                     json_number(test_loss).c_str(), json_number(train_loss).c_str(), json_number(dropped).c_str());
        // The library's calls summed over the ranks (as train_torch.py records them).
        if (get_stats)
          std::fprintf(json, ", \"library_calls\": {\"intercepted\": %.0f, \"bounded\": %.0f, \"fallback\": %.0f}",
                       figures[4], figures[5], figures[6]);
        std::fprintf(json, "}\n");
        std::fflush(json);
      }
      if (rank == 0) {
        std::printf("step %5d  train %7.1f s  comm %3.0f%%  loss %.4f  test accuracy %5.2f%%", step, train_time,
                    100 * comm_time / train_time, train_loss, accuracy);
        if (get_stats) std::printf("  dropped %.3f%%", 100 * dropped);
        std::printf("\n");
        std::fflush(stdout);
      }
    }
  }

  // With an exact reduction replicas stay identical: every rank applied the same averaged
  // gradients. A bounded-time reduction may fill a lost all-gather chunk differently on one rank
  // (counted as divergent_calls in OptiReduce's report): the drift is reported, not fatal.
  double checksum[2] = {0, 0};
  for (float v : model.p) checksum[0] += v;
  checksum[1] = -checksum[0];
  MPI_Allreduce(MPI_IN_PLACE, checksum, 2, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
  const double spread = checksum[0] + checksum[1];  // max - min over ranks

  int status = 0;
  if (rank == 0) {
    std::printf("final: %d steps in %.1f s (allreduce %.1f ms/step on rank 0, %.0f%% of training), test accuracy "
                "%.1f%%, ",
                opt.steps, train_time, 1e3 * comm_time / opt.steps, 100 * comm_time / train_time, accuracy);
    if (spread == 0) std::printf("replicas identical\n");
    else std::printf("replicas differ (parameter sums spread %.3g)\n", spread);
    if (json) {
      std::fprintf(json,
                   "{\"event\": \"end\", \"steps\": %d, \"train_time\": %s, \"comm_time\": %s, \"comm_share\": %s, "
                   "\"wall\": %s, \"final_accuracy\": %s, \"target\": %s, \"time_to_target\": %s, "
                   "\"steps_to_target\": %s, \"step_time_p50\": %s, \"step_time_p99\": %s, \"comm_time_p50\": %s, "
                   "\"comm_time_p99\": %s, \"replica_spread\": %s, \"first_loss\": %s, \"last_loss\": %s, "
                   "\"dropped_fraction\": %s}\n",
                   opt.steps, json_number(train_time).c_str(), json_number(comm_time).c_str(),
                   json_number(comm_time / train_time).c_str(), json_number(MPI_Wtime() - wall_start).c_str(),
                   json_number(accuracy).c_str(), json_number(opt.target).c_str(),
                   json_number(time_to_target).c_str(),
                   steps_to_target ? std::to_string(steps_to_target).c_str() : "null",
                   json_number(percentile(step_times, 50)).c_str(), json_number(percentile(step_times, 99)).c_str(),
                   json_number(percentile(comm_times, 50)).c_str(), json_number(percentile(comm_times, 99)).c_str(),
                   json_number(spread).c_str(), json_number(first_loss).c_str(), json_number(last_loss).c_str(),
                   json_number(get_stats ? (last_lib[0] > 0 ? last_lib[1] / last_lib[0] : 0.0) : NAN).c_str());
      std::fclose(json);
    }
    if (opt.check && !(accuracy > opt.min_accuracy)) {
      std::fprintf(stderr, "train_mlp: CHECK FAILED: test accuracy %.2f%% <= %.2f%%\n", accuracy, opt.min_accuracy);
      status = 1;
    }
    if (opt.check && !(last_loss < first_loss)) {
      std::fprintf(stderr, "train_mlp: CHECK FAILED: training loss did not decrease (%.4f -> %.4f)\n", first_loss,
                   last_loss);
      status = 1;
    }
    if (opt.expect_identical && spread != 0) {
      std::fprintf(stderr, "train_mlp: CHECK FAILED: replicas differ (parameter sums spread %.3g)\n", spread);
      status = 1;
    }
  }
  MPI_Bcast(&status, 1, MPI_INT, 0, MPI_COMM_WORLD);
  MPI_Finalize();
  return status;
}
