// libFuzzer target: bytes -> a message (header frame + payload frames) ->
// the decoder and every body type. Must never crash, leak or read out of
// bounds; errors are the expected outcome.
#include <cstddef>
#include <cstdint>
#include <string>

#include "proto_msgs/codec.h"
#include "proto_msgs/messages.h"

using namespace pstrain;
using namespace pstrain::proto;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  // Layout: [n payloads (1 byte)] [n x u16 payload length] [header bytes...]
  // followed by the payload bytes; lengths are clipped to what is there.
  Message m;
  size_t pos = 0;
  size_t n = size > 0 ? data[pos++] % 8 : 0;
  std::vector<size_t> lengths;
  for (size_t i = 0; i < n && pos + 2 <= size; ++i, pos += 2) {
    lengths.push_back(data[pos] | (size_t{data[pos + 1]} << 8));
  }
  size_t payload_total = 0;
  for (size_t l : lengths) payload_total += l;
  size_t rest = size - pos;
  size_t header_len = rest > payload_total ? rest - payload_total : rest / 2;
  m.header = Buffer::Copy(data + pos, header_len);
  pos += header_len;
  for (size_t l : lengths) {
    size_t take = std::min(l, size - pos);
    m.payloads.push_back(Buffer::Copy(data + pos, take));
    pos += take;
  }
  auto d = Decode(std::move(m));
  if (!d.ok()) return 0;
  (void)d->body<RegisterRequest>();
  (void)d->body<ClusterView>();
  (void)d->body<TableLayout>();
  (void)d->body<CreateTablesRequest>();
  (void)d->body<DefineTablesRequest>();
  (void)d->body<Heartbeat>();
  (void)d->body<HeartbeatReply>();
  (void)d->body<BarrierRequest>();
  (void)d->body<StoreRequest>();
  (void)d->body<KvRequest>();
  (void)d->body<DumpRequest>();
  (void)d->body<CheckpointArrive>();
  (void)d->body<CheckpointDone>();
  (void)d->body<SaveShardRequest>();
  (void)d->body<ShardSaved>();
  (void)d->body<RecoverNotice>();
  (void)d->body<WaitRecoveryRequest>();
  (void)d->body<Recovered>();
  (void)d->body<RetireWorker>();
  (void)d->body<ShardClaim>();
  (void)d->body<ReadmitWorker>();
  (void)d->body<Rejoin>();
  for (size_t i = 0; i < d->num_payloads(); ++i) {
    (void)d->CheckPayload(i, DType::kF32);
    (void)d->CheckPayload(i, DType::kU64);
  }
  // A bundle's frames as inner messages (kPushPull), each decoded in turn.
  auto inner = SplitBundle(*d, 2);
  if (inner.ok()) {
    for (Message& m : *inner) {
      auto di = Decode(std::move(m));
      if (di.ok()) (void)di->body<KvRequest>();
    }
  }
  return 0;
}
