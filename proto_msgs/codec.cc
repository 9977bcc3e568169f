#include "proto_msgs/codec.h"

#include "absl/strings/str_cat.h"

namespace pstrain::proto {

const char* MsgTypeName(MsgType t) {
  switch (t) {
    case MsgType::kReply: return "Reply";
    case MsgType::kRegister: return "Register";
    case MsgType::kGetCluster: return "GetCluster";
    case MsgType::kDefineTables: return "DefineTables";
    case MsgType::kCreateTables: return "CreateTables";
    case MsgType::kHeartbeat: return "Heartbeat";
    case MsgType::kBarrier: return "Barrier";
    case MsgType::kWorkerDone: return "WorkerDone";
    case MsgType::kShutdown: return "Shutdown";
    case MsgType::kStoreSet: return "StoreSet";
    case MsgType::kStoreGet: return "StoreGet";
    case MsgType::kPull: return "Pull";
    case MsgType::kPush: return "Push";
    case MsgType::kPing: return "Ping";
  }
  return "Unknown";
}

const char* RoleName(Role r) {
  switch (r) {
    case Role::kUnknown: return "unknown";
    case Role::kCoordinator: return "coordinator";
    case Role::kServer: return "server";
    case Role::kWorker: return "worker";
    case Role::kTool: return "tool";
  }
  return "unknown";
}

namespace internal {

absl::Status BodyError(const char* what, MsgType type) {
  return absl::InvalidArgumentError(
      absl::StrCat("malformed ", MsgTypeName(type), " body: ", what));
}

void FillDescriptors(Header& header, const std::vector<Buffer>& payloads,
                     const std::vector<DType>& dtypes) {
  header.payloads.clear();
  header.payloads.reserve(payloads.size());
  for (size_t i = 0; i < payloads.size(); ++i) {
    DType t = i < dtypes.size() ? dtypes[i] : DType::kU8;
    header.payloads.push_back({t, payloads[i].size() / DTypeSize(t)});
  }
}

}  // namespace internal

absl::Status Decoded::CheckPayload(size_t i, DType t) const {
  if (i >= header_.payloads.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat(MsgTypeName(header_.type), ": missing payload ", i));
  }
  if (header_.payloads[i].dtype != t) {
    return absl::InvalidArgumentError(absl::StrCat(MsgTypeName(header_.type), ": payload ", i,
                                                   " has the wrong element type"));
  }
  return absl::OkStatus();
}

absl::StatusOr<Decoded> Decode(Message message, const DecodeLimits& limits) {
  const Buffer& frame = message.header;
  if (frame.size() == 0) return absl::InvalidArgumentError("empty header frame");
  if (frame.size() > limits.max_header_bytes) {
    return absl::InvalidArgumentError(
        absl::StrCat("header frame of ", frame.size(), " bytes exceeds ", limits.max_header_bytes));
  }
  if (message.payloads.size() > limits.max_payloads) {
    return absl::InvalidArgumentError(absl::StrCat("too many payload frames: ",
                                                   message.payloads.size()));
  }
  Decoded d;
  proto_internal::SpanStreamBuf buf(reinterpret_cast<const char*>(frame.data()), frame.size());
  std::istream is(&buf);
  proto_internal::tl_decode_buf = &buf;
  try {
    cereal::PortableBinaryInputArchive ar(is);
    ar(d.header_);
  } catch (const std::exception& e) {
    proto_internal::tl_decode_buf = nullptr;
    return absl::InvalidArgumentError(absl::StrCat("malformed header: ", e.what()));
  }
  proto_internal::tl_decode_buf = nullptr;
  const Header& h = d.header_;
  if (h.magic != kHeaderMagic) return absl::InvalidArgumentError("bad header magic");
  if (h.version != kProtocolVersion) {
    return absl::FailedPreconditionError(absl::StrCat("protocol version ", h.version,
                                                      " (this build speaks ", kProtocolVersion, ")"));
  }
  auto type = static_cast<uint16_t>(h.type);
  if (type < static_cast<uint16_t>(MsgType::kReply) || type > static_cast<uint16_t>(MsgType::kLast)) {
    return absl::InvalidArgumentError(absl::StrCat("unknown message type ", type));
  }
  if (h.payloads.size() != message.payloads.size()) {
    return absl::InvalidArgumentError(absl::StrCat(MsgTypeName(h.type), ": ", h.payloads.size(),
                                                   " payload descriptors for ",
                                                   message.payloads.size(), " payload frames"));
  }
  uint64_t total = frame.size();
  for (size_t i = 0; i < h.payloads.size(); ++i) {
    size_t elem = DTypeSize(h.payloads[i].dtype);
    if (elem == 0) {
      return absl::InvalidArgumentError(absl::StrCat(MsgTypeName(h.type), ": payload ", i,
                                                     " has an unknown element type"));
    }
    uint64_t count = h.payloads[i].count;
    if (count > limits.max_message_bytes / elem || count * elem != message.payloads[i].size()) {
      return absl::InvalidArgumentError(absl::StrCat(
          MsgTypeName(h.type), ": payload ", i, " is ", message.payloads[i].size(),
          " bytes, its descriptor says ", count, " elements of ", elem, " bytes"));
    }
    total += message.payloads[i].size();
  }
  if (total > limits.max_message_bytes) {
    return absl::InvalidArgumentError(absl::StrCat("message of ", total, " bytes exceeds ",
                                                   limits.max_message_bytes));
  }
  d.body_offset_ = buf.consumed();
  d.message_ = std::move(message);
  return d;
}

Message EncodeHeaderOnly(Header header, std::vector<Buffer> payloads,
                         const std::vector<DType>& dtypes) {
  internal::FillDescriptors(header, payloads, dtypes);
  std::ostringstream os(std::ios::binary);
  {
    cereal::PortableBinaryOutputArchive ar(os);
    ar(header);
  }
  Message m;
  m.header = Buffer::FromString(std::move(os).str());
  m.payloads = std::move(payloads);
  return m;
}

Message EncodeError(Role sender_role, int32_t sender_rank, const absl::Status& status) {
  Header h;
  h.type = MsgType::kReply;
  h.sender_role = sender_role;
  h.sender_rank = sender_rank;
  h.status_code = static_cast<int32_t>(status.code());
  h.status_message = std::string(status.message());
  return EncodeHeaderOnly(std::move(h));
}

Message EncodeOk(Role sender_role, int32_t sender_rank) {
  Header h;
  h.type = MsgType::kReply;
  h.sender_role = sender_role;
  h.sender_rank = sender_rank;
  return EncodeHeaderOnly(std::move(h));
}

absl::Status RemoteStatus(const Header& header) {
  if (header.status_code == 0) return absl::OkStatus();
  auto code = static_cast<absl::StatusCode>(header.status_code);
  if (header.status_code < 0 || header.status_code > 16) code = absl::StatusCode::kUnknown;
  return absl::Status(code, absl::StrCat("from ", RoleName(header.sender_role), " ",
                                         header.sender_rank, ": ", header.status_message));
}

absl::StatusOr<Decoded> DecodeReply(absl::StatusOr<Message> reply, absl::string_view context) {
  if (!reply.ok()) return Annotate(reply.status(), context);
  absl::StatusOr<Decoded> d = Decode(*std::move(reply));
  if (!d.ok()) return Annotate(d.status(), context);
  if (d->type() != MsgType::kReply) {
    return absl::InvalidArgumentError(absl::StrCat(context, ": expected a reply, got ",
                                                   MsgTypeName(d->type())));
  }
  PS_RETURN_IF_ERROR(Annotate(RemoteStatus(d->header()), context));
  return d;
}

}  // namespace pstrain::proto
