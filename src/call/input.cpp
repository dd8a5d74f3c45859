// What a call reads of the caller's buffers, and when it lets go of them: the own shard of the
// input is read by the reduce, the other shards by the scatter sends, from the input itself or
// from a staged copy where a send may outlive the call; the all-gather sends read the sums where
// the reduce wrote them (TarCall::sums).
#include <cstring>

#include "optireduce/engine/clock_us.hpp"
#include "optireduce/engine/log.hpp"
#include "optireduce/engine/call/tar_call.hpp"

namespace optireduce {

void TarCall::stage_input() {
  if (transformed_) {
    // Each shard encoded on its own, so a shard can be decoded as soon as it is complete and a
    // lost chunk spreads over that shard's blocks; staged in the call's format.
    s_.hadamard.begin(s_.layout, s_.comm_id, s_.epoch, request_.shape.format, request_.input, staging_->data.data(),
                      request_.output, s_.send_order);
    scatter_source_ = own_source_ = staged();
    return;
  }
  // The own shard is never sent as it is: the reduce reads it from the caller's input and writes
  // the sum where the all-gather sends read it (TarCall::reduce).
  own_source_ = input();
  scatter_source_ = input();
  if (!stages_each_send()) return;
  // A bounded call can return with its sends still queued behind a stalled stream, which this
  // transport cannot cancel: they read a staged copy of the other shards, never the caller's
  // buffer. (An exact call returns only once every peer has all its data; a transport that can
  // abandon its sends drops those still reading the input when the call returns: release_caller_buffers.)
  // Each chunk is copied just before its send (stage_for_send), so the first sends leave at once
  // and the transport reads the copy while it is still in the cache.
  scatter_source_ = staged();
}

void TarCall::stage_for_send(const Extent& chunk) {
  if (stages_each_send() && chunk.length)
    std::memcpy(staged() + chunk.offset * element_bytes_, input() + chunk.offset * element_bytes_, chunk.length * element_bytes_);
}

void TarCall::release_caller_buffers() {
  // The scatter sends read the input, and the all-gather sends the output (sums_in_output).
  if (!abandons_sends_ || (scatter_source_ != input() && !sums_in_output())) return;
  if (!any_send_in_flight()) return;
  // The caller's buffers are theirs again once this returns. Whatever is still queued by now goes
  // to a peer that has told this rank it is done or is past this call's deadline: dropped. Sends
  // the transport has handed on but not completed complete without the peer: polled for.
  const auto until = after_us(Clock::now(), kReleaseWaitUs);
  auto handler = [this](const InboundMessage& m) { handle(m); };
  while (!transport_.abandon_queued_sends()) {
    if (Clock::now() >= until) {
      OR_LOG(error, "sends still read the caller's buffers as the call returns (the transport did not complete them)");
      return;
    }
    (void)transport_.poll(until, handler);
  }
}

}  // namespace optireduce
