// What a call does about lost datagrams (tar/resend.hpp): it asks its senders again for what a phase
// lacks, and answers its peers' requests from what it still holds.
#include "optireduce/engine/call/tar_call.hpp"

#include "optireduce/engine/tar/schedule.hpp"

namespace optireduce {

void TarCall::ask_for_missing(std::size_t phase) {
  const unsigned round = s_.resends.asked(phase);
  s_.resends.note_asked(phase, Clock::now());
  const std::size_t fits = (transport_.traits().max_message_bytes - WireHeader::kEncodedSize) / sizeof(std::uint32_t);
  const auto flags = static_cast<std::uint16_t>((phase == 1 ? WireHeader::kFlagGatherPhase : 0) | (round << WireHeader::kResendRoundShift));
  auto& list = s_.resends.list();
  for (int k = 1; k < s_.ranks && staging_->has_header_slot(); ++k) {
    // A peer with nothing to send this rank in the phase lacks nothing here: its list is empty.
    const int peer = rotation_peer(s_.rank, s_.ranks, k);
    if (phase == 0) s_.scatter.missing_from(peer, list);
    else s_.gather.missing_from(peer, list);
    if (list.empty()) continue;
    if (list.size() > fits) list.resize(fits);
    if (post(peer, Lane::control, MessageKind::resend_request, flags, 0, static_cast<std::uint32_t>(list.size()),
             s_.resends.encode(list)).ok()) {
      ++s_.resends.requests_sent;
      s_.resends.chunks_asked += list.size();
    }
  }
}

bool TarCall::lost_for_good(std::size_t phase, Clock::duration resend_wait) const {
  // Over a reliable transport everything comes; without rounds, nothing is asked again.
  if (transport_.traits().reliable) return false;
  if (!asks_resends()) return true;
  // A peer that resumed from a stall reads the requests that waited for it only then.
  return s_.resends.all_asked(phase) &&
         Clock::now() >= std::max(s_.resends.gives_up_at(phase, resend_wait), stall_counted_until_ + resend_wait);
}

void TarCall::on_resend_request(const Inbound& in, const InboundMessage& message) {
  if (!serves_resends()) return;
  const int peer = static_cast<int>(in.header.source);
  const bool gather = in.header.flags & WireHeader::kFlagGatherPhase;
  const std::size_t phase = gather ? 1 : 0;
  // Scatter-reduce: the peer's own chunks (its shard); all-gather: this rank's reduced ones.
  const std::uint32_t chunks = s_.layout.chunks_in_shard(gather ? s_.rank : peer);
  if (!s_.resends.decode(message, in.header.length, chunks)) {
    ++s_.rejects.misplaced;
    return;
  }
  if (!s_.resends.take(peer, phase, in.header.resend_round())) return;
  for (std::uint32_t c : s_.resends.decoded()) {
    if (!staging_->has_header_slot()) return;
    if (!gather) {
      if (transformed_) s_.hadamard.await_encoded(peer);
      // The peer has closed that chunk, and its reduced chunk may have overwritten this rank's
      // contribution to it (in the Hadamard domain's staging, or an in-place caller's buffer).
      if (s_.gather.has(peer, c)) continue;
      if (!send(peer, MessageKind::scatter_chunk, s_.layout.chunk(peer, c), 0, scatter_source_).ok()) return;
    } else {
      // A chunk not reduced yet goes to the peer when it is.
      if (!s_.scatter.reduced(c)) continue;
      const std::uint16_t flags = s_.scatter.reduced_partial(c) ? WireHeader::kFlagPartial : 0;
      if (!send(peer, MessageKind::gather_chunk, s_.layout.chunk(s_.rank, c), flags, sums()).ok()) return;
    }
    ++s_.resends.chunks_resent;
  }
}

}  // namespace optireduce
