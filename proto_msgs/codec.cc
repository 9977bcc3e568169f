#include "proto_msgs/codec.h"

#include <bit>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "proto_msgs/messages.h"

namespace pstrain::proto {
namespace {

// Cereal's portable binary archive, little-endian (what it writes on every
// machine we build for): each archive opens with one byte that is 1 for
// little-endian data, then the fields in order, fixed-width, a length
// (uint64) before every string and vector, and a uint32 class version the
// first time an archive meets a versioned type.
static_assert(std::endian::native == std::endian::little,
              "the fast coders assume a little-endian host");
constexpr uint8_t kLittleEndian = 1;
constexpr uint32_t kKvRequestVersion = 1;  // CEREAL_CLASS_VERSION in messages.h
constexpr uint32_t kKvPartVersion = 1;
constexpr size_t kHeaderFixedBytes = 1 + 4 + 2 + 2 + 1 + 4 + 8 + 8 + 4;
constexpr size_t kPayloadDescBytes = 1 + 8;
constexpr size_t kKvPartBytes = 4 + 8 + 8;

class Writer {
 public:
  explicit Writer(uint8_t* p) : p_(p) {}
  template <typename T>
  void Put(T v) {
    std::memcpy(p_, &v, sizeof(T));
    p_ += sizeof(T);
  }
  void PutBytes(const void* data, size_t n) {
    if (n > 0) std::memcpy(p_, data, n);
    p_ += n;
  }
  uint8_t* pos() const { return p_; }

 private:
  uint8_t* p_;
};

// Reads with bounds checks; any failure makes ok() false for good.
class Reader {
 public:
  Reader(const uint8_t* p, size_t n) : p_(p), end_(p + n) {}
  template <typename T>
  T Get() {
    T v{};
    if (static_cast<size_t>(end_ - p_) < sizeof(T)) {
      ok_ = false;
      p_ = end_;
      return v;
    }
    std::memcpy(&v, p_, sizeof(T));
    p_ += sizeof(T);
    return v;
  }
  const uint8_t* Skip(size_t n) {
    if (static_cast<size_t>(end_ - p_) < n) {
      ok_ = false;
      p_ = end_;
      return nullptr;
    }
    const uint8_t* at = p_;
    p_ += n;
    return at;
  }
  size_t remaining() const { return static_cast<size_t>(end_ - p_); }
  size_t consumed(const uint8_t* begin) const { return static_cast<size_t>(p_ - begin); }
  bool ok() const { return ok_; }

 private:
  const uint8_t* p_;
  const uint8_t* end_;
  bool ok_ = true;
};

size_t HeaderBytes(const Header& h) {
  return kHeaderFixedBytes + 8 + h.status_message.size() + 8 +
         h.payloads.size() * kPayloadDescBytes;
}

void WriteHeader(const Header& h, Writer& w) {
  w.Put<uint8_t>(kLittleEndian);
  w.Put<uint32_t>(h.magic);
  w.Put<uint16_t>(h.version);
  w.Put<uint16_t>(static_cast<uint16_t>(h.type));
  w.Put<uint8_t>(static_cast<uint8_t>(h.sender_role));
  w.Put<int32_t>(h.sender_rank);
  w.Put<uint64_t>(h.epoch);
  w.Put<int64_t>(h.step);
  w.Put<int32_t>(h.status_code);
  w.Put<uint64_t>(h.status_message.size());
  w.PutBytes(h.status_message.data(), h.status_message.size());
  w.Put<uint64_t>(h.payloads.size());
  for (const PayloadDesc& p : h.payloads) {
    w.Put<uint8_t>(static_cast<uint8_t>(p.dtype));
    w.Put<uint64_t>(p.count);
  }
}

// The header as Cereal would read it; false when the bytes are anything
// but a well-formed little-endian header (the caller then asks Cereal).
bool ReadHeader(const Buffer& frame, Header* h, size_t* consumed) {
  Reader r(frame.data(), frame.size());
  if (r.Get<uint8_t>() != kLittleEndian) return false;
  h->magic = r.Get<uint32_t>();
  h->version = r.Get<uint16_t>();
  h->type = static_cast<MsgType>(r.Get<uint16_t>());
  h->sender_role = static_cast<Role>(r.Get<uint8_t>());
  h->sender_rank = r.Get<int32_t>();
  h->epoch = r.Get<uint64_t>();
  h->step = r.Get<int64_t>();
  h->status_code = r.Get<int32_t>();
  uint64_t len = r.Get<uint64_t>();
  if (!r.ok() || len > r.remaining()) return false;
  const uint8_t* text = r.Skip(len);
  h->status_message.assign(reinterpret_cast<const char*>(text), len);
  uint64_t n = r.Get<uint64_t>();
  if (!r.ok() || n > r.remaining() / kPayloadDescBytes) return false;
  h->payloads.resize(n);
  for (PayloadDesc& p : h->payloads) {
    p.dtype = static_cast<DType>(r.Get<uint8_t>());
    p.count = r.Get<uint64_t>();
  }
  if (!r.ok()) return false;
  *consumed = r.consumed(frame.data());
  return true;
}

size_t KvRequestBytes(const KvRequest& b) {
  return 1 + 4 + 8 + (b.parts.empty() ? 0 : 4) + b.parts.size() * kKvPartBytes + 4 + 1 + 1 + 1;
}

void WriteKvRequest(const KvRequest& b, Writer& w) {
  w.Put<uint8_t>(kLittleEndian);
  w.Put<uint32_t>(kKvRequestVersion);
  w.Put<uint64_t>(b.parts.size());
  for (size_t i = 0; i < b.parts.size(); ++i) {
    if (i == 0) w.Put<uint32_t>(kKvPartVersion);
    w.Put<uint32_t>(b.parts[i].table);
    w.Put<uint64_t>(b.parts[i].begin);
    w.Put<uint64_t>(b.parts[i].count);
  }
  w.Put<uint32_t>(b.num_samples);
  w.Put<uint8_t>(b.retire ? 1 : 0);
  w.Put<uint8_t>(b.partial ? 1 : 0);
  w.Put<uint8_t>(b.values_f16 ? 1 : 0);
}

}  // namespace

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
    case MsgType::kDumpRows: return "DumpRows";
    case MsgType::kCheckpointArrive: return "CheckpointArrive";
    case MsgType::kSaveShard: return "SaveShard";
    case MsgType::kRecover: return "Recover";
    case MsgType::kWaitRecovery: return "WaitRecovery";
    case MsgType::kRetireWorker: return "RetireWorker";
    case MsgType::kClaimShard: return "ClaimShard";
    case MsgType::kReadmitWorker: return "ReadmitWorker";
    case MsgType::kRejoin: return "Rejoin";
    case MsgType::kPushPull: return "PushPull";
    case MsgType::kPipeActivation: return "PipeActivation";
    case MsgType::kPipeGradient: return "PipeGradient";
    case MsgType::kPipeAbort: return "PipeAbort";
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
  size_t consumed = 0;
  if (!ReadHeader(frame, &d.header_, &consumed)) {
    // Not what the fast reader expects: Cereal decides (and explains).
    d.header_ = Header();
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
    consumed = buf.consumed();
  }
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
  d.body_offset_ = consumed;
  d.message_ = std::move(message);
  return d;
}

Message EncodeHeaderOnly(Header header, std::vector<Buffer> payloads,
                         const std::vector<DType>& dtypes) {
  internal::FillDescriptors(header, payloads, dtypes);
  uint8_t* out = nullptr;
  Message m;
  m.header = Buffer::Allocate(HeaderBytes(header), &out);
  Writer w(out);
  WriteHeader(header, w);
  m.payloads = std::move(payloads);
  return m;
}

Message Encode(Header header, const KvRequest& body, std::vector<Buffer> payloads,
               const std::vector<DType>& dtypes) {
  internal::FillDescriptors(header, payloads, dtypes);
  uint8_t* out = nullptr;
  Message m;
  m.header = Buffer::Allocate(HeaderBytes(header) + KvRequestBytes(body), &out);
  Writer w(out);
  WriteHeader(header, w);
  WriteKvRequest(body, w);
  m.payloads = std::move(payloads);
  return m;
}

template <>
absl::StatusOr<KvRequest> Decoded::body<KvRequest>() const {
  const Buffer& frame = message_.header;
  Reader r(frame.data() + body_offset_, frame.size() - body_offset_);
  KvRequest out;
  bool ok = r.Get<uint8_t>() == kLittleEndian;
  (void)r.Get<uint32_t>();  // class version: read, not checked (as Cereal)
  uint64_t n = r.Get<uint64_t>();
  ok = ok && r.ok() && n <= r.remaining() / kKvPartBytes;
  if (ok) {
    out.parts.resize(n);
    if (n > 0) (void)r.Get<uint32_t>();  // KvPart's class version
    for (KvPart& part : out.parts) {
      part.table = r.Get<uint32_t>();
      part.begin = r.Get<uint64_t>();
      part.count = r.Get<uint64_t>();
    }
    out.num_samples = r.Get<uint32_t>();
    out.retire = r.Get<uint8_t>() != 0;
    out.partial = r.Get<uint8_t>() != 0;
    out.values_f16 = r.Get<uint8_t>() != 0;
    ok = r.ok() && r.remaining() == 0;
  }
  if (ok) return out;
  // Not what the fast reader expects: Cereal decides (and explains).
  proto_internal::SpanStreamBuf buf(reinterpret_cast<const char*>(frame.data()) + body_offset_,
                                    frame.size() - body_offset_);
  std::istream is(&buf);
  KvRequest slow;
  proto_internal::tl_decode_buf = &buf;
  try {
    cereal::PortableBinaryInputArchive ar(is);
    ar(slow);
  } catch (const std::exception& e) {
    proto_internal::tl_decode_buf = nullptr;
    return internal::BodyError(e.what(), header_.type);
  }
  proto_internal::tl_decode_buf = nullptr;
  if (buf.remaining() != 0) return internal::BodyError("trailing bytes after the body", header_.type);
  return slow;
}

Message EncodeBundle(Header header, std::vector<Message> messages) {
  size_t frames = 0;
  for (const Message& m : messages) frames += 1 + m.payloads.size();
  std::vector<Buffer> payloads;
  payloads.reserve(frames);
  for (Message& m : messages) {
    payloads.push_back(std::move(m.header));
    for (Buffer& b : m.payloads) payloads.push_back(std::move(b));
  }
  const std::vector<DType> bytes(frames, DType::kU8);
  return EncodeHeaderOnly(std::move(header), std::move(payloads), bytes);
}

absl::StatusOr<std::vector<Message>> SplitBundle(const Decoded& bundle, size_t max_messages) {
  std::vector<Message> out;
  const std::string what = MsgTypeName(bundle.type());
  for (size_t i = 0; i < bundle.num_payloads();) {
    if (out.size() == max_messages) {
      return absl::InvalidArgumentError(
          absl::StrCat(what, ": more than ", max_messages, " messages in one bundle"));
    }
    Message m;
    m.header = bundle.payload(i++);
    Header h;
    size_t consumed = 0;
    if (!ReadHeader(m.header, &h, &consumed)) {
      return absl::InvalidArgumentError(
          absl::StrCat(what, ": the header of message ", out.size(), " in the bundle is malformed"));
    }
    if (h.payloads.size() > bundle.num_payloads() - i) {
      return absl::InvalidArgumentError(absl::StrCat(
          what, ": message ", out.size(), " in the bundle names ", h.payloads.size(),
          " payloads, the bundle has ", bundle.num_payloads() - i, " frames left"));
    }
    m.payloads.assign(bundle.message().payloads.begin() + static_cast<std::ptrdiff_t>(i),
                      bundle.message().payloads.begin() +
                          static_cast<std::ptrdiff_t>(i + h.payloads.size()));
    i += h.payloads.size();
    out.push_back(std::move(m));
  }
  return out;
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
