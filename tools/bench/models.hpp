// The models optireduce-bench model replays: a compute sleep standing in for one GPU's forward and
// backward pass, then one allreduce per DDP gradient bucket.
//
// Parameter counts: ResNet-50 25.6 M (He et al., "Deep Residual Learning for Image Recognition",
// CVPR 2016; torchvision's resnet50 has 25,557,032), BERT-large 340 M (Devlin et al., "BERT",
// NAACL 2019: 24 layers, 1024 hidden, 16 heads), GPT-2 small 124 M (Radford et al., "Language
// Models are Unsupervised Multitask Learners", 2019; 124,439,808 in the released checkpoint).
//
// Compute time per step:
//  - ResNet-50: 0.213 s = 256 images per GPU / 1200 img/s, NVIDIA DeepLearningExamples,
//    PyTorch/Classification/ConvNets/resnet50v1.5/README.md, "Training performance: NVIDIA DGX-1
//    16GB (8x V100 16GB)", 1 GPU, mixed precision (a published measurement).
//  - BERT-large: 0.42 s, and GPT-2: 0.15 s are ESTIMATES, not measurements: 6 x parameters x
//    tokens per GPU step (Kaplan et al., "Scaling Laws for Neural Language Models", 2020) at 40
//    TFLOP/s achieved (about a third of a V100's mixed-precision peak): BERT-large 64 x 128 tokens,
//    GPT-2 8 x 1024 tokens.
// --compute-ms overrides them.
//
// Buckets: PyTorch DistributedDataParallel fills buckets of bucket_cap_mb = 25 (MiB) in reverse
// parameter order, and caps its first bucket at 1 MiB (torch.distributed._DEFAULT_FIRST_BUCKET_BYTES)
// so communication starts early: one 1 MiB bucket, then 25 MiB buckets, then the rest, float32.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "options.hpp"

namespace optireduce::bench {

struct Model {
  const char* name;
  std::uint64_t params;
  double compute_s;
};
inline constexpr Model kModels[] = {
    {"resnet50", 25'557'032ULL, 0.213},
    {"bert-large", 340'000'000ULL, 0.42},
    {"gpt2", 124'439'808ULL, 0.15},
};

inline const Model* find_model(const std::string& name) {
  for (const auto& m : kModels)
    if (name == m.name) return &m;
  return nullptr;
}

inline std::vector<std::uint64_t> ddp_buckets(std::uint64_t params, std::uint64_t bucket_bytes, std::uint64_t first_bytes) {
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

// A fraction of the model, so that a heavy one fits a small machine: the first bucket, then
// round(scale x the rest) of the others (at least one), full-size ones first; the compute sleep
// scales alike. compute_ms < 0: the model's own.
inline Entry model_entry(const Model& m, double scale, double bucket_mib, double first_bucket_mib, double compute_ms) {
  constexpr double kMiB = 1024.0 * 1024.0;
  const auto full = ddp_buckets(m.params, static_cast<std::uint64_t>(bucket_mib * kMiB),
                                static_cast<std::uint64_t>(first_bucket_mib * kMiB));
  Entry e;
  e.name = e.model = m.name;
  e.params = m.params;
  e.scale = scale;
  e.full_buckets = full.size();
  e.buckets = full;
  if (scale < 1.0) {
    const std::size_t first_n = first_bucket_mib > 0 ? 1 : 0;
    const std::size_t rest = full.size() - first_n;
    const auto keep = std::max<std::size_t>(1, static_cast<std::size_t>(std::lround(scale * static_cast<double>(rest))));
    e.buckets.assign(full.begin(), full.begin() + static_cast<long>(first_n + std::min(keep, rest)));
  }
  e.compute_s = (compute_ms >= 0 ? compute_ms / 1e3 : m.compute_s) * scale;
  return e;
}

}  // namespace optireduce::bench
