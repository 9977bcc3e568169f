// KvClient: a worker's view of the parameter servers.
//
// Pull and Push are asynchronous: they split the request by server (dense
// tables by the layout's ranges, sparse ids by SparseOwner), send one
// message per server with every table's part in it (a large dense push goes
// in pieces, see push_partition_bytes), and return a handle;
// Wait() collects the replies. Values are not copied when they need not be:
// a dense table held whole by one server is handed out as the reply buffer
// itself, and gradient buffers travel to the servers without a copy when
// they map onto one server. Every server is sent a push each step (possibly
// empty) so that its clock of this worker advances.
//
// Thread-safe for concurrent Pull/Push calls; a handle is used by one thread.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/rpc.h"
#include "proto_msgs/codec.h"
#include "proto_msgs/messages.h"

namespace pstrain::worker {

struct KvClientOptions {
  int32_t rank = 0;  // this worker's rank
  // Deadline of a pull or push. Under BSP/SSP a pull may wait for the
  // slowest worker, so this is long.
  absl::Duration request_timeout = absl::Minutes(10);
  // A server's share of a dense push larger than this travels in messages
  // of at most this many bytes of gradient (KvRequest::partial), so that
  // the server applies one while the next arrives (0: one message). The
  // server applies such a push piece by piece: a piece it refuses (NaN/Inf)
  // changes nothing, the pieces before it stay applied.
  uint64_t push_partition_bytes = 1 << 20;
  // Pulls ask for the values in IEEE half precision (KvRequest::values_f16):
  // half the bytes from the servers; the model computes with those values
  // widened back to floats, the servers keep and update floats.
  bool pull_f16 = false;
};

// Rows of one sparse table to pull: `ids` (any order, duplicates allowed)
// into `out` (ids.size() x dim floats, row i for ids[i]).
// Rows of one sparse table for `ids`: copied into `out` (ids.size() x dim
// floats), or with `out` null handed back by PullHandle::Wait as a Buffer,
// the received payload itself when one server sent them all (no copy).
struct SparsePull {
  uint32_t table = 0;
  std::span<const uint64_t> ids;
  float* out = nullptr;
};

// Gradients of one sparse table: rows `grads` (ids.size() x dim floats) for
// `ids` (unique). `grads_owner` keeps them alive while they are sent.
struct SparsePush {
  uint32_t table = 0;
  std::span<const uint64_t> ids;
  Buffer grads;
};

// Gradient of a whole dense table (table.size floats).
struct DensePush {
  uint32_t table = 0;
  Buffer grads;
};

class KvClient;

class PullHandle {
 public:
  PullHandle() = default;
  // Waits for every server, fills the sparse outputs, and returns the dense
  // tables (by position in the Pull's dense list; each buffer holds the
  // table's `size` floats). `sparse_rows` (by position in the sparse list)
  // gets the rows of each SparsePull without an `out`.
  absl::StatusOr<std::vector<Buffer>> Wait(std::vector<Buffer>* sparse_rows = nullptr);
  bool valid() const { return state_ != nullptr; }

 private:
  friend class KvClient;
  struct State;
  std::shared_ptr<State> state_;
};

class PushHandle {
 public:
  PushHandle() = default;
  absl::Status Wait();
  bool valid() const { return !futures_.empty(); }

 private:
  friend class KvClient;
  std::vector<RpcFuture> futures_;
  std::vector<int> servers_;
};

class KvClient {
 public:
  // `node` must be started and outlive the client; `servers` are the
  // servers' endpoints by rank.
  KvClient(RpcNode* node, proto::TableLayout layout, const std::vector<std::string>& servers,
           KvClientOptions options);

  const proto::TableLayout& layout() const { return layout_; }
  int num_servers() const { return static_cast<int>(peers_.size()); }

  // Pulls whole dense tables and sparse rows, as of `clock`.
  PullHandle Pull(const std::vector<uint32_t>& dense_tables, const std::vector<SparsePull>& sparse,
                  int64_t clock);
  // Pushes gradients summed over `num_samples` samples for step `clock`.
  // Every row of sparse table `table` on every server (model export):
  // appends to `ids` and `rows` (ids.size() x dim). Blocks.
  absl::Status DumpSparse(uint32_t table, std::vector<uint64_t>* ids, std::vector<float>* rows);
  // The same for a versioned export (`export_request`: mode, seq, since;
  // proto::DumpRequest): a base cuts every server's change log and reads
  // every row; a delta the rows changed since export `since`, and the ids
  // removed into `removed`. FailedPrecondition (naming the server) when a
  // server cannot give a delta: a base is needed.
  absl::Status DumpExport(uint32_t table, const proto::DumpRequest& export_request,
                          std::vector<uint64_t>* ids, std::vector<float>* rows,
                          std::vector<uint64_t>* removed);

  // With `retire`, this is the worker's last push: synchronous consistency
  // models stop waiting for it.
  PushHandle Push(const std::vector<DensePush>& dense, const std::vector<SparsePush>& sparse,
                  uint32_t num_samples, int64_t clock, bool retire = false);
  // A push of step `push_clock` and a pull as of `pull_clock`, as Push then
  // Pull, but each server that gets both gets them in one message
  // (proto::kPushPull): one request and one reply instead of two of each.
  // The server applies (or, under BSP, sums) the push before it serves the
  // pull. The push handle completes with the pull's reply there.
  std::pair<PushHandle, PullHandle> PushPull(const std::vector<DensePush>& dense,
                                             const std::vector<SparsePush>& sparse,
                                             uint32_t num_samples, int64_t push_clock,
                                             const std::vector<uint32_t>& dense_tables,
                                             const std::vector<SparsePull>& pulls,
                                             int64_t pull_clock);

 private:
  // A pull put together: its handle (no futures yet) and each server's
  // message (none for a server it asks nothing).
  struct OutgoingPull {
    PullHandle handle;
    std::vector<std::optional<Message>> messages;
  };
  OutgoingPull BuildPull(const std::vector<uint32_t>& dense_tables,
                         const std::vector<SparsePull>& sparse, int64_t clock) const;
  // Each server's push messages in sending order: the pieces of a large
  // dense push, then the one that moves the clock.
  std::vector<std::vector<Message>> BuildPush(const std::vector<DensePush>& dense,
                                              const std::vector<SparsePush>& sparse,
                                              uint32_t num_samples, int64_t clock,
                                              bool retire) const;
  // Sends them round robin over the servers (without each server's last
  // with `keep_last`), adding the calls to `h`.
  void SendPush(std::vector<std::vector<Message>>& messages, bool keep_last, absl::Time deadline,
                PushHandle* h);

  // A dense range of a push and its gradient.
  struct DensePiece {
    proto::KvPart part;
    Buffer grads;
  };
  // One push message being put together.
  struct OutgoingPush {
    proto::KvRequest body;
    std::vector<Buffer> payloads;
    std::vector<proto::DType> types;
    void Add(const proto::KvPart& part, Buffer grads) {
      body.parts.push_back(part);
      payloads.push_back(std::move(grads));
      types.push_back(proto::DType::kF32);
    }
  };
  // One server's dense parts as push messages of at most
  // push_partition_bytes of gradient each (always at least one message).
  std::vector<OutgoingPush> CutDensePush(const std::vector<DensePiece>& parts) const;

  proto::Header MakeHeader(proto::MsgType type, int64_t clock) const;

  RpcNode* node_;
  proto::TableLayout layout_;
  KvClientOptions options_;
  std::vector<PeerId> peers_;
  // Per table: its dense ranges (empty for sparse tables).
  std::vector<std::vector<proto::DenseRange>> ranges_;
};

}  // namespace pstrain::worker
