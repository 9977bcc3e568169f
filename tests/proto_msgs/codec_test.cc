#include "proto_msgs/codec.h"

#include <random>

#include <gtest/gtest.h>

#include "proto_msgs/messages.h"

namespace pstrain::proto {
namespace {

Message PushMessage() {
  Header h;
  h.type = MsgType::kPush;
  h.sender_role = Role::kWorker;
  h.sender_rank = 3;
  h.step = 17;
  KvRequest body;
  body.parts = {{/*table=*/2, /*begin=*/0, /*count=*/4}, {5, 100, 3}};
  body.num_samples = 64;
  std::vector<uint64_t> ids = {1, 2, 3, 4};
  std::vector<float> grads = {0.5f, -1.0f, 2.0f};
  return Encode(h, body, {Buffer::FromVector(std::move(ids)), Buffer::FromVector(std::move(grads))},
                {DType::kU64, DType::kF32});
}

TEST(Codec, RoundTripKeepsHeaderBodyAndPayloads) {
  auto d = Decode(PushMessage());
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_EQ(d->type(), MsgType::kPush);
  EXPECT_EQ(d->header().sender_rank, 3);
  EXPECT_EQ(d->header().step, 17);
  auto body = d->body<KvRequest>();
  ASSERT_TRUE(body.ok()) << body.status();
  ASSERT_EQ(body->parts.size(), 2u);
  EXPECT_EQ(body->parts[1].begin, 100u);
  EXPECT_EQ(body->num_samples, 64u);
  ASSERT_TRUE(d->CheckPayload(0, DType::kU64).ok());
  EXPECT_EQ(d->payload_as<uint64_t>(0)[3], 4u);
  EXPECT_EQ(d->payload_as<float>(1)[2], 2.0f);
  EXPECT_EQ(d->CheckPayload(1, DType::kU64).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(d->CheckPayload(2, DType::kU64).code(), absl::StatusCode::kInvalidArgument);
}

TEST(Codec, PayloadSizeDisagreeingWithDescriptorIsRejected) {
  Message m = PushMessage();
  m.payloads[1] = Buffer::FromString("abc");  // 3 bytes, descriptor says 3 floats
  EXPECT_EQ(Decode(std::move(m)).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(Codec, MissingPayloadFrameIsRejected) {
  Message m = PushMessage();
  m.payloads.pop_back();
  EXPECT_EQ(Decode(std::move(m)).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(Codec, OtherProtocolVersionIsAFailedPrecondition) {
  Header h;
  h.type = MsgType::kPing;
  h.version = kProtocolVersion + 1;
  EXPECT_EQ(Decode(EncodeHeaderOnly(h)).status().code(), absl::StatusCode::kFailedPrecondition);
}

TEST(Codec, UnknownMessageTypeIsRejected) {
  Header h;
  h.type = static_cast<MsgType>(999);
  EXPECT_EQ(Decode(EncodeHeaderOnly(h)).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(Codec, ForgedHugeLengthPrefixIsRejectedWithoutAllocating) {
  // A header whose status_message claims 2^62 bytes.
  Header h;
  h.type = MsgType::kPing;
  h.status_message = "x";
  Message m = EncodeHeaderOnly(h);
  std::string bytes(m.header.view());
  // Find the one-byte string "x" preceded by its 8-byte length 1 and forge it.
  size_t pos = bytes.find(std::string("\x01\0\0\0\0\0\0\0x", 9));
  ASSERT_NE(pos, std::string::npos);
  uint64_t huge = uint64_t{1} << 62;
  std::memcpy(&bytes[pos], &huge, 8);
  m.header = Buffer::FromString(std::move(bytes));
  auto d = Decode(std::move(m));
  EXPECT_EQ(d.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(d.status().message().find("length prefix"), std::string::npos) << d.status();
}

TEST(Codec, BodyWithTrailingBytesIsRejected) {
  Header h;
  h.type = MsgType::kBarrier;
  BarrierRequest b{"x", 2};
  Message m = Encode(h, b);
  std::string bytes(m.header.view());
  bytes += "junk";
  m.header = Buffer::FromString(std::move(bytes));
  auto d = Decode(std::move(m));
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(d->body<BarrierRequest>().status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(Codec, ReadmissionMessagesRoundTrip) {
  Header h;
  h.type = MsgType::kReadmitWorker;
  ReadmitWorker r{2, ReadmitPhase::kCommit, 41};
  auto d = Decode(Encode(h, r));
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_EQ(d->type(), MsgType::kReadmitWorker);
  auto back = d->body<ReadmitWorker>();
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->rank, 2);
  EXPECT_EQ(back->phase, ReadmitPhase::kCommit);
  EXPECT_EQ(back->step, 41);

  h.type = MsgType::kReply;
  Rejoin j;
  j.state = RejoinState::kResume;
  j.step = 41;
  j.position.rank = 2;
  j.position.clock = 41;
  j.position.epoch = 1;
  j.position.rows = 3200;
  j.samples = 9000;
  j.adopter = -1;
  auto e = Decode(Encode(h, j));
  ASSERT_TRUE(e.ok()) << e.status();
  auto jb = e->body<Rejoin>();
  ASSERT_TRUE(jb.ok()) << jb.status();
  EXPECT_EQ(jb->state, RejoinState::kResume);
  EXPECT_EQ(jb->step, 41);
  EXPECT_EQ(jb->position.epoch, 1);
  EXPECT_EQ(jb->position.rows, 3200);
  EXPECT_EQ(jb->samples, 9000u);
  EXPECT_EQ(jb->adopter, -1);
}

TEST(Codec, ErrorReplyCarriesCodeAndMessage) {
  Message m = EncodeError(Role::kServer, 1, absl::NotFoundError("no table 7"));
  auto d = DecodeReply(std::move(m), "pull");
  EXPECT_EQ(d.status().code(), absl::StatusCode::kNotFound);
  EXPECT_NE(d.status().message().find("no table 7"), std::string::npos);
  EXPECT_NE(d.status().message().find("server 1"), std::string::npos);
}

TEST(Codec, TransportErrorPassesThroughDecodeReply) {
  auto d = DecodeReply(absl::DeadlineExceededError("late"), "pull");
  EXPECT_EQ(d.status().code(), absl::StatusCode::kDeadlineExceeded);
}

}  // namespace
}  // namespace pstrain::proto

namespace pstrain::proto {
namespace {

TEST(Codec, TableSpecCarriesEvictionAndDtype) {
  Header h;
  h.type = MsgType::kDefineTables;
  DefineTablesRequest r;
  r.tables.resize(1);
  r.tables[0].kind = TableKind::kSparse;
  r.tables[0].dim = 8;
  r.tables[0].admission.min_count = 2;
  r.tables[0].eviction.max_rows = 123456789012ull;
  r.tables[0].eviction.policy = EvictPolicy::kLfu;
  r.tables[0].eviction.ttl_steps = 77;
  r.tables[0].dtype = RowDtype::kBfloat16;
  auto d = Decode(Encode(h, r));
  ASSERT_TRUE(d.ok()) << d.status();
  auto back = d->body<DefineTablesRequest>();
  ASSERT_TRUE(back.ok()) << back.status();
  ASSERT_EQ(back->tables.size(), 1u);
  const TableSpec& t = back->tables[0];
  EXPECT_EQ(t.admission.min_count, 2u);
  EXPECT_EQ(t.eviction.max_rows, 123456789012ull);
  EXPECT_EQ(t.eviction.policy, EvictPolicy::kLfu);
  EXPECT_EQ(t.eviction.ttl_steps, 77u);
  EXPECT_EQ(t.dtype, RowDtype::kBfloat16);
}

}  // namespace
}  // namespace pstrain::proto
