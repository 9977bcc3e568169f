// The server's part of elastic workers: retiring a dropped worker and
// re-admitting it when it comes back.
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
// confirmed the commit, so the check in OnPush (clock == applied, pushed ==
// clock) accepts it; if it has nothing to train, its retiring push retires
// it again for good. Under SSP and ASP there is no step to agree on: its
// clock restarts at C = the largest slowest-active clock over the servers
// (never below this server's), so SSP's slowest clock does not go back and
// no other worker waits for the newcomer to catch up.
#include <spdlog/spdlog.h>

#include "absl/strings/str_cat.h"
#include "server/ps/parameter_server.h"

namespace pstrain::server {

using proto::Consistency;
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
  if (body->rank < 0 || body->rank >= static_cast<int32_t>(retired_.size())) {
    return ReplyError(req, absl::InvalidArgumentError(absl::StrCat("no worker ", body->rank)));
  }
  node_->Reply(req, proto::EncodeOk(Role::kServer, rank_));
  // Dropped again before it rejoined: nothing left to wait for.
  const bool was_readmitting = readmissions_.erase(body->rank) > 0;
  if (!store_ || (retired_[body->rank] && !was_readmitting)) return;
  retired_[body->rank] = true;
  spdlog::warn("server {}: worker {} is gone; steps no longer wait for it", rank_, body->rank);
  if (store_->layout().consistency == Consistency::kBsp) MaybeCompleteBspStep();
  ReleaseParkedPulls();
}

void ParameterServer::OnReadmitWorker(const Decoded& d, const RpcRequest& req) {
  if (d.header().sender_role != Role::kCoordinator) {
    return ReplyError(req, absl::PermissionDeniedError("only the coordinator re-admits workers"));
  }
  auto body = d.body<proto::ReadmitWorker>();
  if (!body.ok()) return ReplyError(req, body.status());
  const int32_t w = body->rank;
  if (w < 0 || w >= static_cast<int32_t>(retired_.size())) {
    return ReplyError(req, absl::InvalidArgumentError(absl::StrCat("no worker ", w)));
  }
  if (!store_) return ReplyError(req, absl::AbortedError("no tables (not created yet, or recovering)"));
  const Consistency mode = store_->layout().consistency;
  const uint64_t epoch = store_->layout().epoch;
  if (body->phase == ReadmitPhase::kPrepare) {
    if (!retired_[w]) {
      return ReplyError(req, absl::FailedPreconditionError(absl::StrCat(
                                 "worker ", w, " is not retired on server ", rank_)));
    }
    int64_t proposal = 0;
    if (mode == Consistency::kBsp) {
      // A step somebody pushed may still complete without it; none after.
      proposal = pushers_this_step_ == 0 ? applied_ : applied_ + 1;
      readmissions_[w] = Readmission{proposal, epoch};
    } else {
      int64_t slowest = SlowestActiveClock();
      if (slowest == INT64_MAX) {  // nobody else trains: any clock will do
        slowest = 0;
        for (int64_t c : pushed_) slowest = std::max(slowest, c);
      }
      proposal = slowest;
    }
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
    readmissions_.erase(w);
    node_->Reply(req, proto::EncodeOk(Role::kServer, rank_));
    if (mode == Consistency::kBsp) MaybeCompleteBspStep();
    ReleaseParkedPulls();
    return;
  }
  if (mode == Consistency::kBsp) {
    auto it = readmissions_.find(w);
    if (it == readmissions_.end() || it->second.epoch != epoch || body->step < applied_) {
      // Without the hold this server may have passed the step: refuse
      // rather than wait for a push that can never be accepted.
      readmissions_.erase(w);
      return ReplyError(req, absl::FailedPreconditionError(absl::StrCat(
                                 "server ", rank_, " cannot take worker ", w, " back at step ",
                                 body->step, ": not prepared (or rolled back since) at step ",
                                 applied_)));
    }
    readmissions_.erase(it);
    pushed_[w] = body->step;  // steps before it do not wait for it; its first push is for it
    retired_[w] = false;
    spdlog::info("server {}: worker {} re-admitted: steps from {} wait for it (step {} open)", rank_,
                 w, body->step, applied_);
    node_->Reply(req, proto::EncodeOk(Role::kServer, rank_));
    MaybeCompleteBspStep();  // the hold is lifted
    ReleaseParkedPulls();
    return;
  }
  int64_t slowest = SlowestActiveClock();
  pushed_[w] = slowest == INT64_MAX ? body->step : std::max(body->step, slowest);
  retired_[w] = false;
  readmissions_.erase(w);
  spdlog::info("server {}: worker {} re-admitted at clock {}", rank_, w, pushed_[w]);
  node_->Reply(req, proto::EncodeOk(Role::kServer, rank_));
  ReleaseParkedPulls();
}

bool ParameterServer::ApplyReadmissions() {
  bool held = false;
  const uint64_t epoch = store_ ? store_->layout().epoch : 0;
  for (auto it = readmissions_.begin(); it != readmissions_.end();) {
    if (!store_ || it->second.epoch != epoch) {  // the cluster rolled back: clocks were reset
      it = readmissions_.erase(it);
      continue;
    }
    if (applied_ >= it->second.hold) held = true;
    ++it;
  }
  return !held;
}

}  // namespace pstrain::server
