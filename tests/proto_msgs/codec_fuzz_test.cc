// Random and truncated bytes through the decoder: never a crash, always a
// status (OK only when the bytes happen to be a valid message).
#include <random>

#include <gtest/gtest.h>

#include "proto_msgs/codec.h"
#include "proto_msgs/messages.h"

namespace pstrain::proto {
namespace {

// Decodes the header and every body type the bytes could claim to be.
void DecodeEverything(Message m) {
  auto d = Decode(std::move(m));
  if (!d.ok()) {
    EXPECT_FALSE(d.status().message().empty());
    return;
  }
  (void)d->body<RegisterRequest>();
  (void)d->body<ClusterView>();
  (void)d->body<TableLayout>();
  (void)d->body<CreateTablesRequest>();
  (void)d->body<DefineTablesRequest>();
  (void)d->body<KvRequest>();
  (void)d->body<StoreRequest>();
  (void)d->body<BarrierRequest>();
}

std::vector<Message> ValidSamples() {
  std::vector<Message> out;
  Header h;
  h.type = MsgType::kDefineTables;
  DefineTablesRequest def;
  for (int i = 0; i < 3; ++i) {
    TableSpec t;
    t.id = i;
    t.name = "emb.C" + std::to_string(i);
    t.kind = TableKind::kSparse;
    t.dim = 16;
    def.tables.push_back(t);
  }
  out.push_back(Encode(h, def));
  h.type = MsgType::kPull;
  KvRequest kv;
  kv.parts = {{1, 0, 2}};
  out.push_back(Encode(h, kv, {Buffer::FromVector(std::vector<uint64_t>{5, 6})}, {DType::kU64}));
  h.type = MsgType::kRegister;
  RegisterRequest reg;
  reg.node.endpoint = "tcp://127.0.0.1:5555";
  out.push_back(Encode(h, reg));
  return out;
}

TEST(CodecFuzz, RandomBytesNeverCrashTheDecoder) {
  std::mt19937_64 rng(42);
  for (int iter = 0; iter < 20000; ++iter) {
    size_t n = rng() % 300;
    std::string bytes(n, '\0');
    for (auto& c : bytes) c = static_cast<char>(rng());
    Message m;
    m.header = Buffer::FromString(std::move(bytes));
    int np = rng() % 3;
    for (int p = 0; p < np; ++p) m.payloads.push_back(Buffer::FromString(std::string(rng() % 64, 'p')));
    DecodeEverything(std::move(m));
  }
}

TEST(CodecFuzz, TruncatedAndBitFlippedValidMessagesNeverCrash) {
  std::mt19937_64 rng(7);
  for (const Message& sample : ValidSamples()) {
    std::string full(sample.header.view());
    for (size_t cut = 0; cut < full.size(); ++cut) {
      Message m = sample;
      m.header = Buffer::FromString(full.substr(0, cut));
      auto d = Decode(std::move(m));
      if (d.ok()) {
        // The header alone may survive a cut inside the body; the body may not.
        (void)d->body<DefineTablesRequest>();
      }
    }
    for (int iter = 0; iter < 5000; ++iter) {
      std::string bytes = full;
      int flips = 1 + rng() % 4;
      for (int f = 0; f < flips; ++f) bytes[rng() % bytes.size()] ^= static_cast<char>(1 << (rng() % 8));
      Message m = sample;
      m.header = Buffer::FromString(std::move(bytes));
      DecodeEverything(std::move(m));
    }
  }
}

}  // namespace
}  // namespace pstrain::proto
