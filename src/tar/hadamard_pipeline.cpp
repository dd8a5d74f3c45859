#include "optireduce/engine/tar/hadamard_pipeline.hpp"

#include "optireduce/elements/convert.hpp"

namespace optireduce {

HadamardPipeline::HadamardPipeline(unsigned block_log2, bool overlap) {
  options_.block_log2 = block_log2;
  if (overlap) worker_ = std::make_unique<HadamardWorker>();
}

void HadamardPipeline::begin(const ShardLayout& layout, std::uint64_t comm_id, std::uint64_t epoch, ElementFormat format,
                             const void* input, void* staging, void* output, const std::vector<int>& send_order) {
  layout_ = layout;
  comm_id_ = comm_id;
  epoch_ = epoch;
  format_ = format;
  input_ = static_cast<const std::byte*>(input);
  staging_ = static_cast<std::byte*>(staging);
  output_ = static_cast<std::byte*>(output);
  const auto ranks = static_cast<std::size_t>(layout.ranks());
  decoded_.assign(ranks, 0);
  encoded_.assign(ranks, 0);
  if (!worker_) {
    for (int p : send_order) transform(Direction::encode, p, caller_room_);
    return;
  }
  for (int p : send_order) encoded_[p] = worker_->submit([this, p] { transform(Direction::encode, p, worker_room_); });
  await_encoded(send_order.front());  // the first send needs it; the rest overlap the network
}

void HadamardPipeline::transform(Direction direction, int p, Room& room) const {
  const bool encode = direction == Direction::encode;
  const auto coder = encode ? &hadamard_encode : &hadamard_decode;
  const std::size_t bytes = element_bytes(format_);
  const std::uint64_t n = layout_.shard_size(p), at = layout_.shard_begin(p) * bytes;
  const std::byte* from = (encode ? input_ : staging_) + at;
  std::byte* to = (encode ? staging_ : output_) + at;
  if (format_ == ElementFormat::float32) {
    coder(reinterpret_cast<const float*>(from), reinterpret_cast<float*>(to), n, seed(p), options_);
    return;
  }
  if (room.widened.size() < n) {
    room.widened.resize(n);
    room.transformed.resize(n);
  }
  widen(format_, from, room.widened.data(), n);
  coder(room.widened.data(), room.transformed.data(), n, seed(p), options_);
  narrow(format_, room.transformed.data(), to, n);
}

void HadamardPipeline::await_encoded(int p) {
  if (encoded_.empty() || encoded_[p] == 0) return;
  worker_->wait(encoded_[p]);
  encoded_[p] = 0;
}

void HadamardPipeline::shard_final(int p) {
  if (!worker_ || decoded_[p]) return;
  decoded_[p] = 1;
  worker_->submit([this, p] { transform(Direction::decode, p, worker_room_); });
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
      transform(Direction::decode, p, caller_room_);
    }
  quiesce();
}

}  // namespace optireduce
