// The header frame of every pstrain message: magic, protocol version,
// message type, sender, step, status (for replies) and one descriptor per
// raw payload frame. Plain data; see codec.h for encoding and validation.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "proto_msgs/bounded_archive.h"

namespace pstrain::proto {

constexpr uint32_t kHeaderMagic = 0x7073744d;  // "pstM"
// 2: KvRequest gained `partial` (dense pushes in pieces).
// 3: TableSpec gained admission (min_count, admit_probability, sketch bytes).
// 4: TableSpec gained eviction (max_rows, policy, ttl_steps) and dtype.
// 5: the transport packs a message's payloads into a few frames
//    (common/frame_pack.h), which a version-4 peer would read as payloads.
constexpr uint16_t kProtocolVersion = 6;

enum class MsgType : uint16_t {
  kReply = 1,           // generic reply: status + optional body/payloads
  kRegister = 2,        // node -> coordinator
  kGetCluster = 3,      // node -> coordinator: blocks until all have joined
  kDefineTables = 4,    // worker -> coordinator
  kCreateTables = 5,    // coordinator -> server
  kHeartbeat = 6,       // node -> coordinator
  kBarrier = 7,         // node -> coordinator
  kWorkerDone = 8,      // worker -> coordinator
  kShutdown = 9,        // coordinator -> node
  kStoreSet = 10,       // rendezvous store
  kStoreGet = 11,       // rendezvous store (optionally waiting)
  kPull = 12,           // worker -> server
  kPush = 13,           // worker -> server
  kPing = 14,           // anyone -> anyone: liveness / health probe
  kDumpRows = 15,       // worker -> server: read out a sparse table (model export)
  kPipeActivation = 16, // pipeline stage -> next stage: a micro-batch's activations
  kPipeGradient = 17,   // pipeline stage -> previous stage: their gradients
  kPipeAbort = 18,      // pipeline stage -> neighbours: this stage failed (reason)
  kCheckpointArrive = 19,  // worker -> coordinator: paused for a checkpoint
  kSaveShard = 20,      // coordinator -> server: write your checkpoint shard
  kRecover = 21,        // coordinator -> servers, workers: a server failed; roll back
  kWaitRecovery = 22,   // worker -> coordinator: wait for the cluster's recovery
  kRetireWorker = 23,   // coordinator -> servers: a worker is gone, wait no more for it
  kClaimShard = 24,     // worker -> coordinator: give me a dead worker's remaining data
  kReadmitWorker = 25,  // coordinator -> servers: a dropped worker is back (two phases)
  kRejoin = 26,         // worker -> coordinator: am I a returning worker, and from where?
  kPushPull = 27,       // worker -> server: a push and the next pull in one message (a bundle)
  kLast = kPushPull,
};

enum class Role : uint8_t { kUnknown = 0, kCoordinator = 1, kServer = 2, kWorker = 3, kTool = 4 };

enum class DType : uint8_t { kU8 = 1, kF32 = 2, kU64 = 3, kI32 = 4, kF64 = 5, kF16 = 6 };

inline size_t DTypeSize(DType t) {
  switch (t) {
    case DType::kU8: return 1;
    case DType::kF32: return 4;
    case DType::kI32: return 4;
    case DType::kU64: return 8;
    case DType::kF64: return 8;
    case DType::kF16: return 2;
  }
  return 0;
}

const char* MsgTypeName(MsgType t);
const char* RoleName(Role r);

struct PayloadDesc {
  DType dtype = DType::kU8;
  uint64_t count = 0;  // elements

  template <class Archive>
  void serialize(Archive& ar) {
    ar(dtype, count);
  }
};

struct Header {
  uint32_t magic = kHeaderMagic;
  uint16_t version = kProtocolVersion;
  MsgType type = MsgType::kReply;
  Role sender_role = Role::kUnknown;
  int32_t sender_rank = -1;
  // Incarnation of the cluster the sender believes in; servers refuse
  // traffic from an older one (after a rollback).
  uint64_t epoch = 0;
  int64_t step = -1;         // step / clock, where the type uses one
  int32_t status_code = 0;   // replies: absl::StatusCode
  std::string status_message;
  std::vector<PayloadDesc> payloads;

  template <class Archive>
  void serialize(Archive& ar) {
    ar(magic, version, type, sender_role, sender_rank, epoch, step, status_code, status_message,
       payloads);
  }
};

}  // namespace pstrain::proto
