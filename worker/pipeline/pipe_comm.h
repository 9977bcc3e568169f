// PipeComm: the point-to-point links of one pipeline stage with its two
// neighbours (stage - 1 and stage + 1 of the same replica), over the RPC
// node's transport.
//
// Activations go forward and their gradients backward as kPipeActivation /
// kPipeGradient requests whose payloads are the tensors themselves (Buffers
// handed to the transport without a copy, received without a copy). Each
// message carries a tag (replica, step, micro-batch, sequence number) and
// its shape; the I/O thread checks both on arrival against this stage's
// place and widths, and a bad message is refused and fails both stages with
// an error naming them. Messages are consumed in their sender's order (the
// sequence number), and acknowledged when consumed: a sender waits while
// `window` of its messages are unconsumed (bounded memory, e.g. in
// evaluation where nothing flows back).
//
// Every wait has a deadline. While waiting, a neighbour that has been
// silent for `ping_interval` is pinged; no answer within `ping_timeout`
// fails the wait with Unavailable naming that stage; a neighbour that is
// alive but sends nothing fails it after `timeout` (DeadlineExceeded). A
// stage that fails calls Abort(), which tells its neighbours why; their
// waits then fail with Aborted and the reason. Interrupt() fails them
// locally (a rollback of the cluster; the links are then rebuilt with a
// higher `first_seq`).
//
// Thread-safety: OnRequest runs on the I/O thread; everything else is for
// the one stage thread. State shared with RPC callbacks is reference-counted,
// so a late callback after destruction is harmless.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/functional/function_ref.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/rpc.h"
#include "proto_msgs/codec.h"
#include "proto_msgs/messages.h"

namespace pstrain::worker {

struct PipeCommOptions {
  int replica = 0;
  int stage = 0;
  int stages = 1;
  int32_t rank = 0;           // this worker
  std::string prev_endpoint;  // stage - 1 ("" for stage 0)
  std::string next_endpoint;  // stage + 1 ("" for the last stage)
  int32_t prev_rank = -1;     // their worker ranks (for messages)
  int32_t next_rank = -1;
  int in_width = 0;   // width of the activations received (stage > 0)
  int out_width = 0;  // width of the gradients received (not the last stage)
  int max_rows = 1;   // largest micro-batch
  int max_microbatches = 1;
  int window = 4;  // unconsumed messages per direction
  // As in PipelineOptions, which sets them (the reasons are given there).
  absl::Duration timeout = absl::Seconds(300);
  absl::Duration ping_interval = absl::Seconds(1);
  absl::Duration ping_timeout = absl::Seconds(15);
  // The first sequence number of each link. The links rebuilt after a
  // rollback start at a higher one (the cluster epoch << 40), so a message
  // or an abort of the links they replace is told apart and dropped.
  uint64_t first_seq = 0;
};

enum class PipeDir { kPrev = 0, kNext = 1 };

// A consumed message.
struct PipeReceived {
  proto::PipeTransfer tag;
  Buffer data;    // f32[rows * cols]; empty for markers
  Buffer labels;  // activations: f32[rows]
};

class PipeComm {
 public:
  // `node` must be started and outlive this object.
  PipeComm(RpcNode* node, PipeCommOptions options);
  ~PipeComm();
  PipeComm(const PipeComm&) = delete;
  PipeComm& operator=(const PipeComm&) = delete;

  // I/O thread: a decoded kPipeActivation / kPipeGradient / kPipeAbort
  // request. Queues it (the reply is sent when it is consumed) or refuses it.
  void OnRequest(const proto::Decoded& d, const RpcRequest& req);

  // Sends `t` with `payloads` (f32) to a neighbour; fills the tag's replica,
  // stage and sequence number. Waits while `window` messages are unconsumed.
  absl::Status Send(PipeDir to, proto::PipeTransfer t, std::vector<Buffer> payloads);
  // The tag of the next message from a neighbour, not consumed. `what`
  // names what is awaited (for errors).
  absl::StatusOr<proto::PipeTransfer> Peek(PipeDir from, const std::string& what);
  // The next message from a neighbour, consumed.
  absl::StatusOr<PipeReceived> Receive(PipeDir from, const std::string& what);
  // Waits until the neighbours consumed every message sent.
  absl::Status Flush();
  // Tells the neighbours that this stage failed, waiting at most a second.
  void Abort(const absl::Status& why);
  // Fails this stage's waits, now and later, with `why`, telling no one (the
  // cluster rolls back: every stage is interrupted the same way). Any thread.
  void Interrupt(const absl::Status& why);

  // "stage 1 (worker 3)" of the neighbour; "stage 0 of replica 2" for self.
  std::string NeighbourName(PipeDir dir) const;
  std::string SelfName() const;

  // Wall seconds spent waiting (for messages and for room to send).
  double wait_seconds() const { return wait_seconds_; }
  uint64_t bytes_sent() const { return bytes_sent_; }
  const PipeCommOptions& options() const { return options_; }

 private:
  struct Shared;

  absl::Status CheckArrival(PipeDir dir, const proto::Decoded& d,
                            const proto::PipeTransfer& t) const;
  // Waits until `ready` (called with the shared lock held) is true, pinging
  // `peer` while it is silent.
  absl::Status WaitFor(PipeDir peer, absl::FunctionRef<bool()> ready, const std::string& what);
  void StartPing(PipeDir peer);

  RpcNode* node_;
  const PipeCommOptions options_;
  PeerId peers_[2] = {kNoPeer, kNoPeer};
  std::shared_ptr<Shared> shared_;
  double wait_seconds_ = 0;
  uint64_t bytes_sent_ = 0;
};

}  // namespace pstrain::worker
