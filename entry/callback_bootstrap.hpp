// The engine's Bootstrap over the C callbacks a front end gives (include/optireduce/engine.h):
// blobs of any length travel as two fixed-size all-gathers (the lengths, then the blobs padded
// to the longest). A callback that fails makes every all-gather of this bootstrap return empty
// blobs and every sum fail from then on: the engine fails the call it is in, or its creation.
#pragma once

#include <string>

#include "optireduce/engine.h"
#include "optireduce/engine/engine/bootstrap.hpp"

namespace optireduce::entry {

class CallbackBootstrap final : public Bootstrap {
 public:
  // The callbacks' context stays the caller's: this never calls `release`.
  explicit CallbackBootstrap(const optireduce_bootstrap& callbacks, bool owns_context = false)
      : c_(callbacks), owns_context_(owns_context) {}
  // Completes a non-blocking all-gather still in flight: every rank started it. Releases the
  // context where it owns it (a group split from another).
  ~CallbackBootstrap() override;
  std::vector<std::vector<std::byte>> allgather(std::span<const std::byte> mine) override;
  void start_allgather(std::span<const std::byte> mine) override;
  std::vector<std::vector<std::byte>> finish_allgather() override;
  bool allreduce_sum(const float* input, float* output, std::uint64_t count) override;
  bool split(int color, int key, std::unique_ptr<Bootstrap>& out) override;

  int rank() const { return c_.rank; }
  int ranks() const { return c_.ranks; }
  // Empty while every callback succeeded; else which one failed first.
  const std::string& failure() const { return failure_; }

 private:
  bool call(const char* what, int rc);
  std::vector<std::vector<std::byte>> cut(const std::vector<std::byte>& all, std::size_t bytes) const;
  std::vector<std::vector<std::byte>> failed_blobs() const;

  optireduce_bootstrap c_;
  bool owns_context_ = false;
  std::string failure_;
  bool pending_ = false;
  std::vector<std::byte> send_, receive_;  // of the non-blocking all-gather
};

}  // namespace optireduce::entry
