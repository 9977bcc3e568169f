// The hand-written coders of the hot path (Header, KvRequest) must write
// and read exactly what Cereal's portable binary archive does.
#include <random>
#include <sstream>

#include <gtest/gtest.h>

#include "proto_msgs/codec.h"
#include "proto_msgs/messages.h"

namespace pstrain::proto {
namespace {

// What the Cereal-only encoder produced: header archive, then body archive.
template <typename Body>
std::string CerealBytes(const Header& h, const Body* body) {
  std::ostringstream os(std::ios::binary);
  {
    cereal::PortableBinaryOutputArchive ar(os);
    ar(h);
  }
  if (body != nullptr) {
    cereal::PortableBinaryOutputArchive ar(os);
    ar(*body);
  }
  return std::move(os).str();
}

Header RandomHeader(std::mt19937_64& rng) {
  Header h;
  h.type = static_cast<MsgType>(1 + rng() % 14);
  h.sender_role = static_cast<Role>(rng() % 5);
  h.sender_rank = static_cast<int32_t>(rng() % 1000) - 1;
  h.epoch = rng();
  h.step = static_cast<int64_t>(rng() >> 2) - (int64_t{1} << 60);
  h.status_code = static_cast<int32_t>(rng() % 17);
  h.status_message = std::string(rng() % 40, static_cast<char>('a' + rng() % 26));
  return h;
}

KvRequest RandomBody(std::mt19937_64& rng) {
  KvRequest b;
  size_t n = rng() % 5;
  for (size_t i = 0; i < n; ++i) {
    b.parts.push_back(KvPart{static_cast<uint32_t>(rng()), rng(), rng()});
  }
  b.num_samples = static_cast<uint32_t>(rng());
  b.retire = rng() % 2 == 1;
  b.partial = rng() % 2 == 1;
  return b;
}

std::vector<Buffer> Payloads(const std::vector<size_t>& sizes) {
  std::vector<Buffer> out;
  for (size_t n : sizes) out.push_back(Buffer::FromVector(std::vector<uint64_t>(n, 7)));
  return out;
}

TEST(CodecFastPath, KvRequestMessagesAreByteIdenticalToCereal) {
  std::mt19937_64 rng(7);
  for (int i = 0; i < 500; ++i) {
    Header h = RandomHeader(rng);
    KvRequest body = RandomBody(rng);
    std::vector<size_t> sizes(rng() % 4);
    for (size_t& s : sizes) s = rng() % 9;
    std::vector<DType> types(sizes.size(), DType::kU64);
    Message fast = Encode(h, body, Payloads(sizes), types);
    Header described = h;
    internal::FillDescriptors(described, Payloads(sizes), types);
    ASSERT_EQ(std::string(fast.header.view()), CerealBytes(described, &body)) << "case " << i;
  }
}

TEST(CodecFastPath, HeaderOnlyMessagesAreByteIdenticalToCereal) {
  std::mt19937_64 rng(8);
  for (int i = 0; i < 500; ++i) {
    Header h = RandomHeader(rng);
    Message fast = EncodeHeaderOnly(h);
    ASSERT_EQ(std::string(fast.header.view()), CerealBytes<KvRequest>(h, nullptr)) << i;
  }
}

TEST(CodecFastPath, CerealEncodedMessagesDecodeToTheSameValues) {
  std::mt19937_64 rng(9);
  for (int i = 0; i < 500; ++i) {
    Header h = RandomHeader(rng);
    h.version = kProtocolVersion;
    KvRequest body = RandomBody(rng);
    Message m;
    m.header = Buffer::FromString(CerealBytes(h, &body));
    auto d = Decode(std::move(m));
    ASSERT_TRUE(d.ok()) << d.status();
    EXPECT_EQ(d->header().type, h.type);
    EXPECT_EQ(d->header().sender_rank, h.sender_rank);
    EXPECT_EQ(d->header().epoch, h.epoch);
    EXPECT_EQ(d->header().step, h.step);
    EXPECT_EQ(d->header().status_message, h.status_message);
    auto b = d->body<KvRequest>();
    ASSERT_TRUE(b.ok()) << b.status();
    ASSERT_EQ(b->parts.size(), body.parts.size());
    for (size_t k = 0; k < body.parts.size(); ++k) {
      EXPECT_EQ(b->parts[k].table, body.parts[k].table);
      EXPECT_EQ(b->parts[k].begin, body.parts[k].begin);
      EXPECT_EQ(b->parts[k].count, body.parts[k].count);
    }
    EXPECT_EQ(b->num_samples, body.num_samples);
    EXPECT_EQ(b->retire, body.retire);
    EXPECT_EQ(b->partial, body.partial);
  }
}

TEST(CodecFastPath, TruncatedKvRequestBodiesAreRejected) {
  Header h;
  h.type = MsgType::kPull;
  KvRequest body;
  body.parts = {{1, 2, 3}, {4, 5, 6}};
  std::string bytes(Encode(h, body).header.view());
  size_t header_size = EncodeHeaderOnly(h).header.size();
  for (size_t cut = header_size; cut < bytes.size(); ++cut) {
    Message m;
    m.header = Buffer::FromString(bytes.substr(0, cut));
    auto d = Decode(std::move(m));
    ASSERT_TRUE(d.ok()) << d.status();
    EXPECT_EQ(d->body<KvRequest>().status().code(), absl::StatusCode::kInvalidArgument) << cut;
  }
}

}  // namespace
}  // namespace pstrain::proto
