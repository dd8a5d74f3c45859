// The header every engine message carries, its byte encoding, and structural validation.
// Encoding is explicit little-endian so ranks never depend on struct layout or padding.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <span>

namespace optireduce {

enum class MessageKind : std::uint8_t {
  scatter_chunk = 1,  // a contribution to the receiver's shard
  gather_chunk = 2,   // a reduced chunk of the sender's shard
  peer_done = 3,      // header only: "I have everything I need from you for this call"
  missing_list = 4,   // a piece of the bitmap of all-gather chunks the sender lacks at the end
                      // of a bounded call, then (kFlagFigures) the loss window's figures that
                      // ride on it (offset and length count bytes of that list, not elements);
                      // kFlagDecided / kFlagWantsAnswer
  call_failed = 5,    // the sender gave up on this call; payload: the ranks that did not answer
                      // (u32 each), so every rank fails the same call with the same error
  resend_request = 6, // "send these chunks of this call again": payload the chunk indices (u32
                      // each, `length` of them); kFlagGatherPhase names the phase, the round
                      // bits which of the requester's rounds it is (tar/resend.hpp)
  alive = 7,          // header only: "I am in this call and running" (a datagram call's heartbeat:
                      // what a silent peer still owes is late, not lost)
};

struct WireHeader {
  static constexpr std::uint32_t kMagic = 0x5254504fu;  // "OPTR" on the wire
  static constexpr std::uint8_t kVersion = 3;
  static constexpr std::size_t kEncodedSize = 56;
  static constexpr std::uint16_t kFlagLastSlice = 1u << 0;
  // All-gather chunk its owner reduced without every contribution (scaled up): inexact.
  static constexpr std::uint16_t kFlagPartial = 1u << 1;
  // A resend request for all-gather chunks (of the receiver's shard), not scatter-reduce ones.
  static constexpr std::uint16_t kFlagGatherPhase = 1u << 2;
  static constexpr unsigned kResendRoundShift = 3;
  static constexpr std::uint16_t kResendRoundMask = 0x7u << kResendRoundShift;
  // On a last slice: how many more last slices of the phase follow it to this receiver, so a
  // receiver that has one asks for what it lacks only once the rest had time to come.
  static constexpr unsigned kFollowShift = 6;
  static constexpr std::uint16_t kFollowMask = 0x3u << kFollowShift;
  // On a missing list of a calibration call made exact by resends: the sender has decided
  // whether that call was exact everywhere, and asks nothing more of the receiver.
  static constexpr std::uint16_t kFlagDecided = 1u << 8;
  // On a missing list sent again: the receiver answers with its own (the sender still waits for
  // it, or for word that the receiver has decided).
  static constexpr std::uint16_t kFlagWantsAnswer = 1u << 9;
  // What the call computes (tar/call_shape.hpp: its element format, and whether it is a
  // reduce-scatter), on every message of the call: chunks of a call of another shape are refused.
  static constexpr unsigned kShapeShift = 10;
  static constexpr std::uint16_t kShapeMask = 0x7u << kShapeShift;
  // On a missing list: the loss window's figures follow the bitmap (tar/fill_agreement.hpp:
  // riders), as every rank's list of that call carries them.
  static constexpr std::uint16_t kFlagFigures = 1u << 13;
  static std::uint16_t shape_flags(unsigned shape_index) { return static_cast<std::uint16_t>(shape_index << kShapeShift); }
  static std::uint16_t last_slice_flags(std::uint32_t follow) {
    return static_cast<std::uint16_t>(kFlagLastSlice | (std::min<std::uint32_t>(follow, 3) << kFollowShift));
  }

  MessageKind kind = MessageKind::scatter_chunk;
  std::uint16_t flags = 0;
  std::uint32_t source = 0;   // sending rank
  std::uint64_t comm_id = 0;  // identifies job and communicator
  std::uint64_t epoch = 0;    // Transpose AllReduce run on this communicator, from 1
  std::uint64_t total = 0;    // element count of the call (a reduce-scatter's: of its input)
  std::uint64_t offset = 0;   // first element carried, in the whole buffer
  std::uint32_t length = 0;   // elements carried
  // The sender's latest estimate of how long each phase needs to receive everything
  // (elapsed / fraction received), microseconds; 0 when it has none. Drives adaptive deadlines.
  float stamp_scatter = 0.0f;
  float stamp_gather = 0.0f;

  bool last_slice() const { return flags & kFlagLastSlice; }
  bool partial() const { return flags & kFlagPartial; }
  unsigned resend_round() const { return (flags & kResendRoundMask) >> kResendRoundShift; }
  unsigned slices_to_follow() const { return (flags & kFollowMask) >> kFollowShift; }
  unsigned shape() const { return (flags & kShapeMask) >> kShapeShift; }
};

using EncodedHeader = std::span<std::byte, WireHeader::kEncodedSize>;
void encode(const WireHeader& h, EncodedHeader out);

// What a kind's offset and length must satisfy to decode, one rule per kind (extent_rule):
//   within_call  offset + length within the call's `total` elements, without overflow: chunks,
//                and the kinds sent with offset 0 (done, failure, resend request, heartbeat);
//   list_bytes   bytes of the list of missing chunks, not elements (a small call's list with the
//                figures after it is longer than the call): nothing here; the fill agreement
//                checks them against the list's geometry (FillAgreement::piece_of).
enum class ExtentRule : std::uint8_t { within_call, list_bytes };
ExtentRule extent_rule(MessageKind kind);

// Structural checks only (size, magic, version, kind, the kind's extent rule); false when any
// fails. Whether the message belongs to this call is tar/inbound.hpp's.
bool decode(std::span<const std::byte> in, WireHeader& out);

}  // namespace optireduce
