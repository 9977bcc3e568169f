// Frame packing: a message's payloads in fewer ZeroMQ frames.
//
// A pull reply or a push carries one or two payloads per table: for DLRM 26
// tables, 50-80 frames of 2-20 KB a step. ZeroMQ's encoder copies small
// frames through its 8 KB batch buffer and sends each big one in two writes,
// so such a message costs about 90 send and 90 receive calls a step, each a
// wake-up of the other side's I/O thread. Packed, the same message is a
// handful of frames: slices of one allocation at rising addresses (a
// server's pull reply is one allocation sliced per table; a push interleaves
// the slices of two, ids and gradients) travel as one frame without
// copying, and small payloads are copied together into one.
//
// On the wire, behind the header frame, a packed message has a layout frame
//   u32 count, u32 zero, then per payload: u32 frame, u32 zero, u64 offset, u64 size
// followed by the data frames it indexes. The receiver checks every entry
// against the frames it got (a bad layout drops the message) and hands out
// payloads as slices of the received frames, 8-byte aligned like any payload.
#pragma once

#include <cstddef>
#include <span>
#include <vector>

#include "absl/status/statusor.h"
#include "common/buffer.h"

namespace pstrain {

// Payloads up to this size are copied together into shared frames.
constexpr size_t kPackCopyBelowBytes = 32 * 1024;
// Largest frame made by copying payloads together.
constexpr size_t kPackCopyFrameBytes = 1024 * 1024;

struct PackedPayloads {
  Buffer layout;
  std::vector<Buffer> frames;
};

// Plans `payloads` into fewer frames. False (and `out` untouched) when
// packing would not send fewer frames: the payloads then go one a frame.
bool PackPayloads(const std::vector<Buffer>& payloads, PackedPayloads* out);

// The payloads described by `layout` over `frames` (received frames, data
// 8-byte aligned). A slice at an offset that is not a multiple of 8 is
// copied. Errors name what is wrong; at most `max_payloads` payloads.
absl::StatusOr<std::vector<Buffer>> UnpackPayloads(const Buffer& layout,
                                                   std::span<const Buffer> frames,
                                                   size_t max_payloads);

}  // namespace pstrain
