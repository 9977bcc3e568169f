// Encoding and validation of pstrain messages.
//
// Encode() writes the Header (with one descriptor per payload) and a body
// into the header frame. Decode() validates everything a receiver relies on
// *before* using or allocating: frame sizes against limits, magic, protocol
// version, message type, payload count and sizes against the descriptors,
// and length prefixes against the bytes actually present. It never throws
// and never crashes on arbitrary bytes; it returns InvalidArgument (or
// FailedPrecondition for a protocol version mismatch).
#pragma once

#include <cstdint>
#include <span>
#include <sstream>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/status.h"
#include "common/transport.h"
#include "proto_msgs/header.h"

namespace pstrain::proto {

struct DecodeLimits {
  size_t max_header_bytes = 1 << 20;
  size_t max_payloads = 1024;
  uint64_t max_message_bytes = uint64_t{1} << 31;
};

// A validated message: its header, and the frames to read the body and
// payloads from.
class Decoded {
 public:
  const Header& header() const { return header_; }
  MsgType type() const { return header_.type; }
  const Message& message() const { return message_; }
  size_t num_payloads() const { return message_.payloads.size(); }
  const Buffer& payload(size_t i) const { return message_.payloads[i]; }
  // Typed payload. REQUIRES: i < num_payloads(); dtype checked by caller
  // via CheckPayload (or the descriptor).
  template <typename T>
  std::span<const T> payload_as(size_t i) const {
    return message_.payloads[i].as<T>();
  }
  // Checks that payload i exists and has dtype `t`.
  absl::Status CheckPayload(size_t i, DType t) const;

  // Decodes the body that follows the header. InvalidArgument when it is
  // malformed or does not fill the frame exactly.
  template <typename Body>
  absl::StatusOr<Body> body() const;

 private:
  friend absl::StatusOr<Decoded> Decode(Message message, const DecodeLimits& limits);
  Header header_;
  Message message_;
  size_t body_offset_ = 0;
};

absl::StatusOr<Decoded> Decode(Message message, const DecodeLimits& limits = {});

// Builds a message: header (its `payloads` descriptors are filled from
// `payloads` and `dtypes`), body, payload frames.
template <typename Body>
Message Encode(Header header, const Body& body, std::vector<Buffer> payloads = {},
               const std::vector<DType>& dtypes = {});
Message EncodeHeaderOnly(Header header, std::vector<Buffer> payloads = {},
                         const std::vector<DType>& dtypes = {});

// A bundle (kPushPull): whole messages carried as one, so that requests
// that always travel together (a worker's push and its next pull to one
// server) cost one message each way. `header` is the bundle's own (type,
// sender, clock); its payloads are each inner message's header frame
// followed by that message's payloads, all as bytes. The receiver splits
// it with SplitBundle and decodes each inner message as if it had arrived
// alone; it answers the bundle with one reply.
Message EncodeBundle(Header header, std::vector<Message> messages);
// The inner messages of a decoded bundle, not yet decoded (Decode each).
// InvalidArgument when the frames do not divide into at most `max_messages`
// whole messages.
absl::StatusOr<std::vector<Message>> SplitBundle(const Decoded& bundle, size_t max_messages);

// A reply carrying a non-OK status.
Message EncodeError(Role sender_role, int32_t sender_rank, const absl::Status& status);
// A reply carrying OK and nothing else.
Message EncodeOk(Role sender_role, int32_t sender_rank);

// The remote status carried by a decoded reply.
absl::Status RemoteStatus(const Header& header);

// Folds the transport result and the remote status into one: the decoded
// reply when both are OK, the first error otherwise (with `context`).
absl::StatusOr<Decoded> DecodeReply(absl::StatusOr<Message> reply, absl::string_view context);

// The hot path (pulls, pushes and their replies) has hand-written coders
// for the Header and the KvRequest body that write and read exactly the
// bytes Cereal's portable binary archive does (Cereal stays the definition
// of the format and decodes whatever the fast reader does not accept, so
// errors read the same): no stream objects, one allocation per frame.
struct KvRequest;  // proto_msgs/messages.h
Message Encode(Header header, const KvRequest& body, std::vector<Buffer> payloads = {},
               const std::vector<DType>& dtypes = {});
template <>
absl::StatusOr<KvRequest> Decoded::body<KvRequest>() const;

// --- implementation details -------------------------------------------------
namespace internal {
std::string SerializeHeader(const Header& header, std::ostringstream* os);
absl::Status BodyError(const char* what, MsgType type);
void FillDescriptors(Header& header, const std::vector<Buffer>& payloads,
                     const std::vector<DType>& dtypes);
}  // namespace internal

template <typename Body>
Message Encode(Header header, const Body& body, std::vector<Buffer> payloads,
               const std::vector<DType>& dtypes) {
  internal::FillDescriptors(header, payloads, dtypes);
  std::ostringstream os(std::ios::binary);
  {
    cereal::PortableBinaryOutputArchive ar(os);
    ar(header);
  }
  {
    // A second archive (each starts with its own endianness byte): the
    // receiver decodes the header first and the body later, separately.
    cereal::PortableBinaryOutputArchive ar(os);
    ar(body);
  }
  Message m;
  m.header = Buffer::FromString(std::move(os).str());
  m.payloads = std::move(payloads);
  return m;
}

template <typename Body>
absl::StatusOr<Body> Decoded::body() const {
  const Buffer& frame = message_.header;
  proto_internal::SpanStreamBuf buf(reinterpret_cast<const char*>(frame.data()) + body_offset_,
                                    frame.size() - body_offset_);
  std::istream is(&buf);
  Body out;
  proto_internal::tl_decode_buf = &buf;
  try {
    cereal::PortableBinaryInputArchive ar(is);
    ar(out);
  } catch (const std::exception& e) {
    proto_internal::tl_decode_buf = nullptr;
    return internal::BodyError(e.what(), header_.type);
  }
  proto_internal::tl_decode_buf = nullptr;
  if (buf.remaining() != 0) return internal::BodyError("trailing bytes after the body", header_.type);
  return out;
}

}  // namespace pstrain::proto
