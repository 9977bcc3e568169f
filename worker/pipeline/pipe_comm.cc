#include "worker/pipeline/pipe_comm.h"

#include <map>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/status.h"

namespace pstrain::worker {

struct PipeComm::Shared {
  struct Queued {
    proto::PipeTransfer tag;
    std::vector<Buffer> payloads;
    std::string route;
    uint64_t id = 0;
  };
  struct Link {
    std::map<uint64_t, Queued> inbox;  // by sequence number
    uint64_t next_recv = 0;
    uint64_t next_send = 0;
    int outstanding = 0;  // sent, not yet acknowledged
    absl::Time last_heard;
    bool ping_inflight = false;
  };

  absl::Mutex mu;
  absl::CondVar cv;
  absl::Status failure ABSL_GUARDED_BY(mu);
  Link links[2] ABSL_GUARDED_BY(mu);

  void Fail(absl::Status st) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
    if (failure.ok()) failure = std::move(st);
    cv.SignalAll();
  }
};

namespace {

// Abort's notice to the neighbours is best effort: one that has not taken it
// within a second is gone or stuck, and its own timeouts end its wait.
constexpr absl::Duration kAbortNoticeTimeout = absl::Seconds(1);

int Index(PipeDir d) { return static_cast<int>(d); }

const char* PhaseName(proto::PipePhase p) {
  switch (p) {
    case proto::PipePhase::kTrain:
      return "train";
    case proto::PipePhase::kEval:
      return "eval";
    case proto::PipePhase::kEvalEnd:
      return "eval-end";
    case proto::PipePhase::kTrainEnd:
      return "train-end";
    case proto::PipePhase::kEnd:
      return "end";
  }
  return "?";
}

bool HasData(proto::PipePhase p) {
  return p == proto::PipePhase::kTrain || p == proto::PipePhase::kEval;
}

}  // namespace

PipeComm::PipeComm(RpcNode* node, PipeCommOptions options)
    : node_(node), options_(std::move(options)), shared_(std::make_shared<Shared>()) {
  if (!options_.prev_endpoint.empty()) peers_[0] = node_->Connect(options_.prev_endpoint);
  if (!options_.next_endpoint.empty()) peers_[1] = node_->Connect(options_.next_endpoint);
  absl::MutexLock lock(&shared_->mu);
  for (auto& l : shared_->links) {
    l.last_heard = absl::Now();
    l.next_recv = l.next_send = options_.first_seq;
  }
}

PipeComm::~PipeComm() = default;

std::string PipeComm::SelfName() const {
  return absl::StrCat("stage ", options_.stage, " of replica ", options_.replica);
}

std::string PipeComm::NeighbourName(PipeDir dir) const {
  const bool prev = dir == PipeDir::kPrev;
  return absl::StrCat("stage ", options_.stage + (prev ? -1 : 1), " (worker ",
                      prev ? options_.prev_rank : options_.next_rank, ")");
}

absl::Status PipeComm::CheckArrival(PipeDir dir, const proto::Decoded& d,
                                    const proto::PipeTransfer& t) const {
  const bool activation = dir == PipeDir::kPrev;
  const int expected_stage = options_.stage + (activation ? -1 : 1);
  const char* what = activation ? "an activation" : "a gradient";
  auto refuse = [&](const std::string& why) {
    return absl::InvalidArgumentError(
        absl::StrCat(SelfName(), " refused ", what, " from stage ", t.from_stage, " (worker ",
                     d.header().sender_rank, ") tagged replica ", t.replica, " step ", t.step,
                     " micro-batch ", t.microbatch, ": ", why));
  };
  if (peers_[Index(dir)] == kNoPeer) return refuse("this stage has no such neighbour");
  if (t.replica != options_.replica) {
    return refuse(absl::StrCat("this is replica ", options_.replica));
  }
  if (t.from_stage != expected_stage) {
    return refuse(absl::StrCat("expected it from stage ", expected_stage));
  }
  if (static_cast<uint8_t>(t.phase) > static_cast<uint8_t>(proto::PipePhase::kLastPhase)) {
    return refuse(absl::StrCat("unknown phase ", static_cast<int>(t.phase)));
  }
  if (!HasData(t.phase)) {
    if (d.num_payloads() != 0) return refuse("a marker must carry no tensors");
    return absl::OkStatus();
  }
  const int width = activation ? options_.in_width : options_.out_width;
  if (t.cols != width) {
    return refuse(absl::StrCat("width ", t.cols, ", expected ", width));
  }
  if (t.rows < 1 || t.rows > options_.max_rows) {
    return refuse(absl::StrCat(t.rows, " rows, expected 1..", options_.max_rows));
  }
  if (t.num_microbatches < 1 || t.microbatch < 0 || t.microbatch >= t.num_microbatches ||
      (t.phase == proto::PipePhase::kTrain && t.num_microbatches > options_.max_microbatches)) {
    return refuse(absl::StrCat("micro-batch ", t.microbatch, " of ", t.num_microbatches));
  }
  const size_t want = activation ? 2 : 1;
  if (d.num_payloads() != want) {
    return refuse(absl::StrCat(d.num_payloads(), " tensors, expected ", want));
  }
  const uint64_t values = static_cast<uint64_t>(t.rows) * static_cast<uint64_t>(t.cols);
  for (size_t i = 0; i < want; ++i) {
    const uint64_t n = i == 0 ? values : static_cast<uint64_t>(t.rows);
    if (d.header().payloads[i].dtype != proto::DType::kF32 || d.header().payloads[i].count != n) {
      return refuse(absl::StrCat("tensor ", i, " holds ", d.header().payloads[i].count,
                                 " values, its shape needs ", n));
    }
  }
  return absl::OkStatus();
}

void PipeComm::OnRequest(const proto::Decoded& d, const RpcRequest& req) {
  auto body = d.body<proto::PipeTransfer>();
  if (!body.ok()) {
    node_->Reply(req, proto::EncodeError(proto::Role::kWorker, options_.rank, body.status()));
    return;
  }
  Shared& s = *shared_;
  if (body->seq < options_.first_seq) {
    // From the links this one replaced (before a rollback): not for us.
    node_->Reply(req, proto::EncodeError(proto::Role::kWorker, options_.rank,
                                         absl::AbortedError(absl::StrCat(
                                             SelfName(), " dropped a message of its links before "
                                                         "the cluster rolled back"))));
    return;
  }
  if (d.type() == proto::MsgType::kPipeAbort) {
    node_->Reply(req, proto::EncodeOk(proto::Role::kWorker, options_.rank));
    absl::MutexLock lock(&s.mu);
    s.Fail(absl::AbortedError(absl::StrCat("pipeline stopped: stage ", body->from_stage,
                                           " (worker ", d.header().sender_rank, ") of replica ",
                                           body->replica, " failed: ", body->reason)));
    return;
  }
  const PipeDir dir = d.type() == proto::MsgType::kPipeActivation ? PipeDir::kPrev : PipeDir::kNext;
  absl::Status st = CheckArrival(dir, d, *body);
  absl::MutexLock lock(&s.mu);
  Shared::Link& link = s.links[Index(dir)];
  if (st.ok() && (body->seq < link.next_recv || link.inbox.count(body->seq) > 0)) {
    st = absl::InvalidArgumentError(absl::StrCat(
        SelfName(), " received message ", body->seq, " from ", NeighbourName(dir), " twice (",
        PhaseName(body->phase), " step ", body->step, " micro-batch ", body->microbatch, ")"));
  }
  if (!st.ok()) {
    node_->Reply(req, proto::EncodeError(proto::Role::kWorker, options_.rank, st));
    s.Fail(st);
    return;
  }
  Shared::Queued q;
  q.tag = *std::move(body);
  q.payloads = d.message().payloads;
  q.route = req.route;
  q.id = req.id;
  const uint64_t seq = q.tag.seq;
  link.inbox.emplace(seq, std::move(q));
  link.last_heard = absl::Now();
  s.cv.SignalAll();
}

void PipeComm::StartPing(PipeDir peer) {
  proto::Header h;
  h.type = proto::MsgType::kPing;
  h.sender_role = proto::Role::kWorker;
  h.sender_rank = options_.rank;
  std::shared_ptr<Shared> s = shared_;
  const int i = Index(peer);
  std::string who = NeighbourName(peer);
  absl::Duration timeout = options_.ping_timeout;
  node_->Call(peers_[i], proto::EncodeHeaderOnly(h), absl::Now() + timeout)
      .OnDone([s, i, who, timeout](const absl::StatusOr<Message>& reply) {
        absl::Status st = proto::DecodeReply(reply, "ping").status();
        absl::MutexLock lock(&s->mu);
        s->links[i].ping_inflight = false;
        if (st.ok()) {
          s->links[i].last_heard = absl::Now();
          s->cv.SignalAll();
          return;
        }
        s->Fail(absl::UnavailableError(
            absl::StrCat(who, " is not responding: no answer to a ping within ",
                         absl::FormatDuration(timeout), " (", st.message(), ")")));
      });
}

absl::Status PipeComm::WaitFor(PipeDir peer, absl::FunctionRef<bool()> ready,
                               const std::string& what) {
  Shared& s = *shared_;
  const absl::Time start = absl::Now();
  const absl::Time deadline = start + options_.timeout;
  absl::Status result;
  s.mu.Lock();
  while (true) {
    if (!s.failure.ok()) {
      result = s.failure;
      break;
    }
    if (ready()) break;
    const absl::Time now = absl::Now();
    if (now >= deadline) {
      result = absl::DeadlineExceededError(absl::StrCat(
          SelfName(), " waited ", absl::FormatDuration(options_.timeout), " for ", what, " from ",
          NeighbourName(peer), ", which answers pings but sent nothing"));
      break;
    }
    Shared::Link& link = s.links[Index(peer)];
    if (!link.ping_inflight && now - link.last_heard >= options_.ping_interval) {
      link.ping_inflight = true;
      s.mu.Unlock();  // the ping's callback may run on this thread
      StartPing(peer);
      s.mu.Lock();
      continue;
    }
    s.cv.WaitWithDeadline(&s.mu, std::min(deadline, now + options_.ping_interval));
  }
  s.mu.Unlock();
  wait_seconds_ += absl::ToDoubleSeconds(absl::Now() - start);
  return result;
}

absl::Status PipeComm::Send(PipeDir to, proto::PipeTransfer t, std::vector<Buffer> payloads) {
  const int i = Index(to);
  if (peers_[i] == kNoPeer) {
    return absl::InternalError(absl::StrCat(SelfName(), " has no neighbour to send to"));
  }
  Shared& s = *shared_;
  PS_RETURN_IF_ERROR(WaitFor(
      to, [&]() ABSL_NO_THREAD_SAFETY_ANALYSIS { return s.links[i].outstanding < options_.window; },
      "room to send (it has not consumed earlier messages)"));
  {
    absl::MutexLock lock(&s.mu);
    t.seq = s.links[i].next_send++;
    ++s.links[i].outstanding;
  }
  t.replica = options_.replica;
  t.from_stage = options_.stage;
  proto::Header h;
  h.type = to == PipeDir::kNext ? proto::MsgType::kPipeActivation : proto::MsgType::kPipeGradient;
  h.sender_role = proto::Role::kWorker;
  h.sender_rank = options_.rank;
  h.step = t.step;
  for (const Buffer& b : payloads) bytes_sent_ += b.size();
  std::vector<proto::DType> types(payloads.size(), proto::DType::kF32);
  std::string what = absl::StrCat(to == PipeDir::kNext ? "activation" : "gradient", " of step ",
                                  t.step, " micro-batch ", t.microbatch, " to ", NeighbourName(to));
  std::shared_ptr<Shared> shared = shared_;
  node_
      ->Call(peers_[i], proto::Encode(h, t, std::move(payloads), types),
             absl::Now() + options_.timeout)
      .OnDone([shared, i, what](const absl::StatusOr<Message>& reply) {
        absl::Status st = proto::DecodeReply(reply, what).status();
        absl::MutexLock lock(&shared->mu);
        --shared->links[i].outstanding;
        if (st.ok()) {
          shared->links[i].last_heard = absl::Now();
          shared->cv.SignalAll();
        } else {
          shared->Fail(st);
        }
      });
  return absl::OkStatus();
}

absl::StatusOr<proto::PipeTransfer> PipeComm::Peek(PipeDir from, const std::string& what) {
  Shared& s = *shared_;
  const int i = Index(from);
  PS_RETURN_IF_ERROR(WaitFor(
      from,
      [&]() ABSL_NO_THREAD_SAFETY_ANALYSIS {
        return s.links[i].inbox.count(s.links[i].next_recv) > 0;
      },
      what));
  absl::MutexLock lock(&s.mu);
  return s.links[i].inbox.at(s.links[i].next_recv).tag;
}

absl::StatusOr<PipeReceived> PipeComm::Receive(PipeDir from, const std::string& what) {
  PS_RETURN_IF_ERROR(Peek(from, what).status());
  Shared& s = *shared_;
  const int i = Index(from);
  Shared::Queued q;
  {
    absl::MutexLock lock(&s.mu);
    auto it = s.links[i].inbox.find(s.links[i].next_recv);
    q = std::move(it->second);
    s.links[i].inbox.erase(it);
    ++s.links[i].next_recv;
  }
  node_->Reply(q.route, q.id, proto::EncodeOk(proto::Role::kWorker, options_.rank));
  PipeReceived r;
  r.tag = std::move(q.tag);
  if (!q.payloads.empty()) r.data = std::move(q.payloads[0]);
  if (q.payloads.size() > 1) r.labels = std::move(q.payloads[1]);
  return r;
}

absl::Status PipeComm::Flush() {
  Shared& s = *shared_;
  for (PipeDir dir : {PipeDir::kPrev, PipeDir::kNext}) {
    if (peers_[Index(dir)] == kNoPeer) continue;
    PS_RETURN_IF_ERROR(WaitFor(
        dir, [&]() ABSL_NO_THREAD_SAFETY_ANALYSIS { return s.links[Index(dir)].outstanding == 0; },
        "the acknowledgement of the last messages"));
  }
  return absl::OkStatus();
}

void PipeComm::Abort(const absl::Status& why) {
  proto::PipeTransfer t;
  t.replica = options_.replica;
  t.from_stage = options_.stage;
  t.reason = why.ToString();
  t.seq = options_.first_seq;  // marks the abort as one of these links
  proto::Header h;
  h.type = proto::MsgType::kPipeAbort;
  h.sender_role = proto::Role::kWorker;
  h.sender_rank = options_.rank;
  std::vector<RpcFuture> calls;
  for (PeerId p : peers_) {
    if (p != kNoPeer)
      calls.push_back(node_->Call(p, proto::Encode(h, t), absl::Now() + kAbortNoticeTimeout));
  }
  for (const RpcFuture& f : calls) (void)f.Wait();
}

void PipeComm::Interrupt(const absl::Status& why) {
  absl::MutexLock lock(&shared_->mu);
  shared_->Fail(why);
}

}  // namespace pstrain::worker
