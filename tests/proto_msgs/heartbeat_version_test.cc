// Heartbeat version 2 (dashboard numbers) round-trips, and a version-1
// heartbeat from an older node still decodes, with the new fields unset.
#include <cmath>

#include <gtest/gtest.h>

#include "proto_msgs/codec.h"
#include "proto_msgs/messages.h"

namespace pstrain::proto {
namespace {

// The body as version 1 wrote it.
struct HeartbeatV1 {
  int64_t step = 0;
  double samples_per_sec = 0;
  template <class Archive>
  void serialize(Archive& ar, std::uint32_t /*version*/) {
    ar(step, samples_per_sec);
  }
};

}  // namespace
}  // namespace pstrain::proto

CEREAL_CLASS_VERSION(pstrain::proto::HeartbeatV1, 1);

namespace pstrain::proto {
namespace {

Header HeartbeatHeader() {
  Header h;
  h.type = MsgType::kHeartbeat;
  h.sender_role = Role::kWorker;
  h.sender_rank = 1;
  return h;
}

TEST(HeartbeatVersion, Version2RoundTripsEveryField) {
  Heartbeat hb;
  hb.step = 42;
  hb.samples_per_sec = 1234.5;
  hb.samples = 99999;
  hb.loss = 0.456;
  hb.eval_auc = 0.78;
  hb.eval_logloss = 0.44;
  hb.eval_step = 40;
  hb.reader_rows_per_sec = 5e5;
  hb.rss_bytes = 123 << 20;
  hb.cpu_seconds = 3.5;
  hb.table_rows = 1000;
  hb.table_bytes = 64000;
  hb.requests = 77;
  hb.bytes_in = 11;
  hb.bytes_out = 22;
  auto d = Decode(Encode(HeartbeatHeader(), hb));
  ASSERT_TRUE(d.ok()) << d.status();
  auto back = d->body<Heartbeat>();
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->step, 42);
  EXPECT_EQ(back->samples, 99999u);
  EXPECT_DOUBLE_EQ(back->loss, 0.456);
  EXPECT_DOUBLE_EQ(back->eval_auc, 0.78);
  EXPECT_EQ(back->eval_step, 40);
  EXPECT_EQ(back->rss_bytes, 123u << 20);
  EXPECT_EQ(back->table_bytes, 64000u);
  EXPECT_EQ(back->bytes_out, 22u);
}

TEST(HeartbeatVersion, Version5CarriesEveryHeadsEvaluation) {
  Heartbeat hb;
  hb.eval_step = 40;
  hb.eval_heads = {HeadScore{"click", 0.71, 0.52}, HeadScore{"spend", NAN, 2.5}};
  auto d = Decode(Encode(HeartbeatHeader(), hb));
  ASSERT_TRUE(d.ok()) << d.status();
  auto back = d->body<Heartbeat>();
  ASSERT_TRUE(back.ok()) << back.status();
  ASSERT_EQ(back->eval_heads.size(), 2u);
  EXPECT_EQ(back->eval_heads[0].head, "click");
  EXPECT_DOUBLE_EQ(back->eval_heads[0].auc, 0.71);
  EXPECT_EQ(back->eval_heads[1].head, "spend");
  EXPECT_TRUE(std::isnan(back->eval_heads[1].auc));
  EXPECT_DOUBLE_EQ(back->eval_heads[1].logloss, 2.5);
}

TEST(HeartbeatVersion, Version1HeartbeatDecodesWithNewFieldsUnset) {
  HeartbeatV1 old;
  old.step = 7;
  old.samples_per_sec = 321;
  auto d = Decode(Encode(HeartbeatHeader(), old));
  ASSERT_TRUE(d.ok()) << d.status();
  auto hb = d->body<Heartbeat>();
  ASSERT_TRUE(hb.ok()) << hb.status();
  EXPECT_EQ(hb->step, 7);
  EXPECT_DOUBLE_EQ(hb->samples_per_sec, 321);
  EXPECT_TRUE(std::isnan(hb->loss));
  EXPECT_TRUE(std::isnan(hb->eval_auc));
  EXPECT_EQ(hb->eval_step, -1);
  EXPECT_EQ(hb->rss_bytes, 0u);
  EXPECT_TRUE(hb->eval_heads.empty());
}

TEST(HeartbeatVersion, TruncatedVersion2BodyIsRefused) {
  Heartbeat hb;
  Message m = Encode(HeartbeatHeader(), hb);
  std::string bytes(reinterpret_cast<const char*>(m.header.data()), m.header.size() - 4);
  m.header = Buffer::FromString(std::move(bytes));
  auto d = Decode(std::move(m));
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_EQ(d->body<Heartbeat>().status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace pstrain::proto
