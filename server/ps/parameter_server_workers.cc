// The server's part of elastic workers: retiring a dropped worker and
// re-admitting it when it comes back. The coordinator's requests are
// handled here; the rules (proposals, the hold, clocks) are the
// ConsistencyPolicy's (consistency_policy.h).
//
// Retired, a worker is no longer waited for: BSP steps complete without its
// push, SSP bounds ignore its clock. Re-admission has two phases, driven by
// the coordinator, so that every server takes the worker back at the same
// BSP step C, one that no server has passed:
//   prepare: the server proposes C_s = its open step when nobody has pushed
//            it yet, else the next one, and completes no step >= C_s until
//            the commit (the hold);
//   commit:  C = the largest proposal; the worker is active again with its
//            clock at C. A step before C does not wait for it (its clock is
//            past it), so a server one step behind completes its open step
//            without it, as it would have; step C and later wait for it.
// The worker's first push is for step C and is sent only after every server
// confirmed the commit, so BspPolicy::CheckPush (clock == applied, pushed ==
// clock) accepts it; if it has nothing to train, its retiring push retires
// it again for good. Under SSP and ASP there is no step to agree on: its
// clock restarts at C = the largest slowest-active clock over the servers
// (never below this server's), so SSP's slowest clock does not go back and
// no other worker waits for the newcomer to catch up.
#include <spdlog/spdlog.h>

#include "absl/strings/str_cat.h"
#include "server/ps/parameter_server.h"

namespace pstrain::server {

using proto::Decoded;
using proto::MsgType;
using proto::ReadmitPhase;
using proto::Role;

void ParameterServer::OnRetireWorker(const Decoded& d, const RpcRequest& req) {
  if (d.header().sender_role != Role::kCoordinator) {
    return ReplyError(req, absl::PermissionDeniedError("only the coordinator retires workers"));
  }
  auto body = d.body<proto::RetireWorker>();
  if (!body.ok()) return ReplyError(req, body.status());
  if (!policy_ || !policy_->is_worker(body->rank)) {
    return ReplyError(req, absl::InvalidArgumentError(absl::StrCat("no worker ", body->rank)));
  }
  node_->Reply(req, proto::EncodeOk(Role::kServer, rank_));
  // Dropped again before it rejoined: nothing left to wait for.
  const bool was_readmitting = policy_->DropReadmission(body->rank);
  if (!store_ || (policy_->is_retired(body->rank) && !was_readmitting)) return;
  policy_->Retire(body->rank);
  spdlog::warn("server {}: worker {} is gone; steps no longer wait for it", rank_, body->rank);
  MaybeCompleteStep();
  ReleaseParkedPulls();
}

void ParameterServer::OnReadmitWorker(const Decoded& d, const RpcRequest& req) {
  if (d.header().sender_role != Role::kCoordinator) {
    return ReplyError(req, absl::PermissionDeniedError("only the coordinator re-admits workers"));
  }
  auto body = d.body<proto::ReadmitWorker>();
  if (!body.ok()) return ReplyError(req, body.status());
  const int32_t w = body->rank;
  if (!policy_ || !policy_->is_worker(w)) {
    return ReplyError(req, absl::InvalidArgumentError(absl::StrCat("no worker ", w)));
  }
  if (!store_) return ReplyError(req, absl::AbortedError("no tables (not created yet, or recovering)"));
  const uint64_t epoch = store_->layout().epoch;
  if (body->phase == ReadmitPhase::kPrepare) {
    if (!policy_->is_retired(w)) {
      return ReplyError(req, absl::FailedPreconditionError(absl::StrCat(
                                 "worker ", w, " is not retired on server ", rank_)));
    }
    const int64_t proposal = policy_->PrepareReadmission(w, epoch);
    proto::Header h;
    h.type = MsgType::kReply;
    h.sender_role = Role::kServer;
    h.sender_rank = rank_;
    node_->Reply(req, proto::Encode(h, proto::ReadmitWorker{w, ReadmitPhase::kPrepare, proposal}));
    return;
  }
  if (body->phase != ReadmitPhase::kCommit) {
    return ReplyError(req, absl::InvalidArgumentError("unknown re-admission phase"));
  }
  if (body->step < 0) {  // cancelled: the worker stays retired
    policy_->DropReadmission(w);
    node_->Reply(req, proto::EncodeOk(Role::kServer, rank_));
    MaybeCompleteStep();
    ReleaseParkedPulls();
    return;
  }
  const int64_t open = policy_->applied();
  if (absl::Status st = policy_->CommitReadmission(w, body->step, epoch); !st.ok()) {
    return ReplyError(req, absl::Status(st.code(), absl::StrCat("server ", rank_, " ", st.message())));
  }
  if (policy_->sums_pushes()) {
    spdlog::info("server {}: worker {} re-admitted: steps from {} wait for it (step {} open)", rank_,
                 w, body->step, open);
  } else {
    spdlog::info("server {}: worker {} re-admitted at clock {}", rank_, w, policy_->clocks()[w]);
  }
  node_->Reply(req, proto::EncodeOk(Role::kServer, rank_));
  MaybeCompleteStep();  // BSP: the hold is lifted
  ReleaseParkedPulls();
}

}  // namespace pstrain::server
