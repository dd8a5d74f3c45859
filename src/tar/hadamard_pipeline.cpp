#include "optireduce/engine/tar/hadamard_pipeline.hpp"

namespace optireduce {

HadamardPipeline::HadamardPipeline(unsigned block_log2, bool overlap) {
  options_.block_log2 = block_log2;
  if (overlap) worker_ = std::make_unique<HadamardWorker>();
}

void HadamardPipeline::begin(const ShardLayout& layout, std::uint64_t comm_id, std::uint64_t epoch, const float* input,
                             float* staging, float* output, const std::vector<int>& send_order) {
  layout_ = layout;
  comm_id_ = comm_id;
  epoch_ = epoch;
  input_ = input;
  staging_ = staging;
  output_ = output;
  const auto ranks = static_cast<std::size_t>(layout.ranks());
  decoded_.assign(ranks, 0);
  encoded_.assign(ranks, 0);
  if (!worker_) {
    for (int p : send_order) encode(p);
    return;
  }
  for (int p : send_order) encoded_[p] = worker_->submit([this, p] { encode(p); });
  await_encoded(send_order.front());  // the first send needs it; the rest overlap the network
}

void HadamardPipeline::encode(int p) {
  hadamard_encode(input_ + layout_.shard_begin(p), staging_ + layout_.shard_begin(p), layout_.shard_size(p), seed(p), options_);
}

void HadamardPipeline::decode(int p) const {
  hadamard_decode(staging_ + layout_.shard_begin(p), output_ + layout_.shard_begin(p), layout_.shard_size(p), seed(p), options_);
}

void HadamardPipeline::await_encoded(int p) {
  if (encoded_.empty() || encoded_[p] == 0) return;
  worker_->wait(encoded_[p]);
  encoded_[p] = 0;
}

void HadamardPipeline::shard_final(int p) {
  if (!worker_ || decoded_[p]) return;
  decoded_[p] = 1;
  worker_->submit([this, p] { decode(p); });
}

void HadamardPipeline::finish() {
  // Without the worker, decoding once at the end keeps this rank's own work out of the phases'
  // deadlines, which were calibrated on the network alone. With it, the shards left are split
  // between the worker and this thread.
  if (worker_)
    for (int p = 0, turn = 0; p < layout_.ranks(); ++p)
      if (!decoded_[p] && turn++ % 2 == 0) shard_final(p);
  for (int p = 0; p < layout_.ranks(); ++p)
    if (!decoded_[p]) {
      decoded_[p] = 1;
      decode(p);
    }
  quiesce();
}

}  // namespace optireduce
