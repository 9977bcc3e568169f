// The coordinator core's journal: what it writes on each change that
// matters, and how a restarted coordinator takes a running job back.
//
// Taking a job back: the journal names every server and worker and its
// rank. The nodes noticed the loss of the coordinator (heartbeats that go
// unanswered, or a "not registered" answer from the new one), kept their
// state and register again with their rank and `resume` set. Until every
// known node is back (bounded by --resume_timeout) the coordinator holds
// every other request (barriers, store gets, checkpoint arrivals ...: the
// nodes re-issue the ones the old coordinator never answered); then it
// answers them and the job goes on at the same epoch, with no rollback.
// A node that had not joined before the coordinator died joins as it would
// have. A fresh process claiming a known node's rank before any known node
// came back means the whole job was restarted: the journal is set aside and
// the job starts over from its latest checkpoint, as without a journal; once
// known nodes are back, such a process ends the job (its state is gone, and
// a rollback of nodes that kept theirs is not attempted).
#include <spdlog/spdlog.h>

#include <filesystem>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "cluster/node_info.h"
#include "server/coordinator/coordinator.h"

namespace pstrain::server {

using proto::Role;

absl::StatusOr<std::optional<JobJournal>> FinishedJob(const CoordinatorOptions& options) {
  if (options.checkpoint.dir.empty() || options.new_job || options.continue_job) {
    return std::optional<JobJournal>();
  }
  PS_ASSIGN_OR_RETURN(std::optional<JobJournal> j,
                      CoordinatorJournal::Load(CoordinatorJournal::PathIn(options.checkpoint.dir)));
  if (j && j->state != JobState::kFinished) j.reset();
  return j;
}

JobJournal Coordinator::JournalSnapshot() const {
  JobJournal j;
  j.num_servers = options_.num_servers;
  j.num_workers = options_.num_workers;
  j.epoch = epoch_;
  for (const auto* slots : {&servers_, &workers_}) {
    auto& out = slots == &servers_ ? j.servers : j.workers;
    for (const auto& m : *slots) {
      JournalMember jm;
      if (m) {
        jm.info = m->info;
        jm.done = m->done;
      }
      out.push_back(jm);
    }
  }
  for (const auto& [id, rank] : identities_) j.identities.push_back({id, rank});
  j.tables = defined_tables_;
  j.has_layout = layout_.has_value();
  if (layout_) j.layout = *layout_;
  for (const auto& [key, value] : store_.values()) {
    j.store.push_back({key, std::string(reinterpret_cast<const char*>(value.data()), value.size())});
  }
  j.checkpoints = checkpoints_->Journal();
  return j;
}

void Coordinator::Journal(const std::function<absl::Status(CoordinatorJournal&)>& change) {
  if (journal_ == nullptr) return;
  if (absl::Status st = change(*journal_); !st.ok()) {
    spdlog::error("writing the coordinator journal failed ({}); it is removed: a restarted "
                  "coordinator will start this job over from its latest checkpoint",
                  st.ToString());
    std::string path = journal_->path();
    journal_.reset();
    std::remove(path.c_str());
  }
}

void Coordinator::JournalMemberOf(const Member& m) {
  JournalMember jm{m.info, m.done};
  Journal([&](CoordinatorJournal& j) {
    PS_RETURN_IF_ERROR(j.SetMember(m.info.role, jm));
    if (m.info.node_id.empty()) return absl::OkStatus();
    return j.SetIdentity(m.info.node_id, m.info.rank);
  });
}

int32_t Coordinator::IdentityRank(const std::string& node_id) const {
  auto it = identities_.find(node_id);
  return it == identities_.end() ? -1 : it->second;
}

absl::Status Coordinator::OpenJournal() {
  if (options_.checkpoint.dir.empty()) return absl::OkStatus();
  const std::string path = CoordinatorJournal::PathIn(options_.checkpoint.dir);
  std::optional<JobJournal> old;
  if (!options_.new_job) {
    PS_ASSIGN_OR_RETURN(old, CoordinatorJournal::Load(path));
  }
  if (old && old->state == JobState::kRunning) {
    if (old->num_servers != options_.num_servers || old->num_workers != options_.num_workers) {
      return absl::FailedPreconditionError(absl::StrCat(
          "the coordinator journal ", path, " is of a running job of ", old->num_servers,
          " servers and ", old->num_workers, " workers, this one has ", options_.num_servers,
          " and ", options_.num_workers, ": start with the same --servers and --workers to take "
          "it back, or with --new_job to start another"));
    }
    ResumeFrom(*old);
    PS_ASSIGN_OR_RETURN(journal_, CoordinatorJournal::Create(path, std::move(*old)));
  } else {
    if (old && old->state == JobState::kFailed) {
      spdlog::info("the job journaled in {} ended with an error ({}): starting it over", path,
                   old->end_message);
    }
    if (old && old->state == JobState::kFinished) {
      spdlog::info("the job journaled in {} finished{}: training on from its latest checkpoint",
                   path, old->final_step > 0 ? absl::StrCat(" at step ", old->final_step) : "");
    }
    PS_ASSIGN_OR_RETURN(journal_, CoordinatorJournal::Create(path, JournalSnapshot()));
  }
  store_.set_on_change([this](const std::string& key, const Buffer* value) {
    Journal([&](CoordinatorJournal& j) {
      if (value == nullptr) return j.EraseStore(key);
      return j.SetStore(key, std::string(reinterpret_cast<const char*>(value->data()), value->size()));
    });
  });
  checkpoints_->set_on_change([this] {
    Journal([this](CoordinatorJournal& j) { return j.SetCheckpoints(checkpoints_->Journal()); });
  });
  return absl::OkStatus();
}

void Coordinator::ResumeFrom(const JobJournal& j) {
  epoch_ = j.epoch;
  defined_tables_ = j.tables;
  if (j.has_layout) layout_ = j.layout;
  for (const JournalStoreEntry& e : j.store) store_.Set(e.key, Buffer::FromString(std::string(e.value)));
  checkpoints_->Resume(j.checkpoints);
  for (const JournalIdentity& i : j.identities) identities_[i.node_id] = i.rank;
  for (const JournalStoreEntry& e : j.store) {
    int32_t lead = 0;
    if (e.key == "lead" && absl::SimpleAtoi(e.value, &lead)) elastic_->RestoreLead(lead);
  }
  expected_servers_.assign(options_.num_servers, std::nullopt);
  expected_workers_.assign(options_.num_workers, std::nullopt);
  int servers = 0, workers = 0;
  for (const auto* list : {&j.servers, &j.workers}) {
    const bool server = list == &j.servers;
    for (size_t r = 0; r < list->size() && r < (server ? servers_ : workers_).size(); ++r) {
      const JournalMember& jm = (*list)[r];
      if (jm.info.role == Role::kUnknown) continue;
      if (!server && (jm.done || jm.dropped)) {
        // It finished and left, or it was dropped: nothing to wait for.
        Member m;
        m.info = jm.info;
        m.alive = false;
        m.done = jm.done;
        workers_[r] = std::move(m);
        if (jm.dropped && !jm.done) {
          int32_t adopter = -1;
          for (const JournalStoreEntry& e : j.store) {
            if (e.key == absl::StrCat("adopted/", r)) (void)absl::SimpleAtoi(e.value, &adopter);
          }
          elastic_->RestoreDropped(static_cast<int32_t>(r), jm.data_epoch, jm.data_rows, jm.samples,
                                   adopter);
        }
        continue;
      }
      (server ? expected_servers_ : expected_workers_)[r] = jm.info;
      ++(server ? servers : workers);
    }
  }
  resuming_ = true;
  resume_started_ = absl::Now();
  spdlog::warn("taking back the job journaled in {} (started {}, epoch {}, {} tables, next "
               "checkpoint at step {}): waiting up to {} for its {} servers and {} workers to "
               "register again",
               CoordinatorJournal::PathIn(options_.checkpoint.dir), j.started, j.epoch,
               j.tables.size(), j.checkpoints.checkpoint_step,
               absl::FormatDuration(options_.resume_timeout), servers, workers);
}

void Coordinator::OnResumeRegister(const proto::NodeInfo& node, const RpcRequest& req) {
  proto::NodeInfo info = node;
  auto& expected = info.role == Role::kServer ? expected_servers_ : expected_workers_;
  auto& slots = info.role == Role::kServer ? servers_ : workers_;
  const int32_t rank = info.rank;
  const std::string who = MemberName(info.role, rank);
  if (!info.resume) {
    absl::StatusOr<int32_t> late = ChooseRank(info, info.rank);
    if (late.ok() && !expected[*late] && !slots[*late]) {
      // A node that never joined before the coordinator died (it died while
      // the job assembled): it joins now, as it would have.
      resuming_ = false;
      OnRegister(proto::Decode(req.message).value(), req);
      resuming_ = true;
      return MaybeEndResume();
    }
    if (!resumed_any_) {
      absl::Status st = StartOver(absl::StrCat("a new process (", who.empty() ? "a node" : who,
                                               " from ", info.endpoint, ") registered first"));
      if (!st.ok()) return Finish(st);
      return OnRegister(proto::Decode(req.message).value(), req);
    }
    ReplyError(req, absl::AbortedError("the job is being taken back by a restarted coordinator"));
    return Finish(absl::AbortedError(absl::StrCat(
        "a new process (", info.endpoint, ", pid ", info.pid, ") registered while the job was "
        "being taken back by a restarted coordinator: its state is gone, so the job cannot go on "
        "without a rollback; restart it to resume from its latest checkpoint")));
  }
  if (rank < 0 || rank >= static_cast<int32_t>(slots.size()) || !expected[rank] ||
      expected[rank]->incarnation != info.incarnation) {
    return ReplyError(req, absl::FailedPreconditionError(absl::StrCat(
                               who, " (pid ", info.pid, ") is not the process the journal knows "
                               "for that rank: not taken back")));
  }
  resumed_any_ = true;
  if (!slots[rank]) {
    Member m;
    m.info = info;
    m.info.resume = false;
    m.peer = node_->Connect(info.endpoint);
    m.last_seen = absl::Now();
    slots[rank] = std::move(m);
    monitor()->OnJoin(slots[rank]->info);
    spdlog::info("{} registered again from {} (pid {}), its state kept", who, info.endpoint, info.pid);
  }
  slots[rank]->last_seen = absl::Now();
  node_->Reply(req, CoordinatorReply(View(rank)));
  MaybeEndResume();
}

void Coordinator::MaybeEndResume() {
  if (!resuming_) return;
  for (size_t r = 0; r < servers_.size(); ++r) {
    if (expected_servers_[r] && !servers_[r]) return;
  }
  for (size_t r = 0; r < workers_.size(); ++r) {
    if (expected_workers_[r] && !workers_[r]) return;
  }
  resuming_ = false;
  spdlog::info("job taken back in {:.2f}s: every known node registered again; epoch {}, no "
               "rollback",
               absl::ToDoubleSeconds(absl::Now() - resume_started_), epoch_);
  Journal([this](CoordinatorJournal& j) {
    for (const auto* slots : {&servers_, &workers_}) {
      for (const auto& m : *slots) {
        if (m && m->alive) {
          PS_RETURN_IF_ERROR(j.SetMember(m->info.role, JournalMember{m->info, m->done}));
        }
      }
    }
    return absl::OkStatus();
  });
  if (!defined_tables_.empty() && !layout_) {
    // It died during a recovery: finish that one.
    recovery_->Begin("the coordinator restarted during a recovery");
    MaybeFinishRecovery();
  }
  std::vector<RpcRequest> held = std::move(deferred_);
  deferred_.clear();
  for (RpcRequest& r : held) Handle(std::move(r));
  if (AllJoined()) ReplyCluster();
  MaybeEndJob();
}

void Coordinator::CheckResumeTimeout(absl::Time now) {
  if (!resuming_ || finishing_ || now - resume_started_ <= options_.resume_timeout) return;
  std::vector<std::string> missing;
  for (size_t r = 0; r < servers_.size(); ++r) {
    if (expected_servers_[r] && !servers_[r]) missing.push_back(absl::StrCat("server ", r));
  }
  for (size_t r = 0; r < workers_.size(); ++r) {
    if (expected_workers_[r] && !workers_[r]) missing.push_back(absl::StrCat("worker ", r));
  }
  resuming_ = false;
  Finish(absl::DeadlineExceededError(absl::StrCat(
      "taking the job back: ", absl::StrJoin(missing, ", "), " did not register again within ",
      absl::FormatDuration(options_.resume_timeout), " (--resume_timeout)")));
}

absl::Status Coordinator::StartOver(const std::string& why) {
  spdlog::warn("{} before any node of the journaled job came back: the whole job was restarted; "
               "starting it over from its latest checkpoint",
               why);
  resuming_ = false;
  epoch_ = 0;
  defined_tables_.clear();
  layout_.reset();
  identities_.clear();
  for (auto& w : workers_) w.reset();
  for (auto& s : servers_) s.reset();
  store_.set_on_change(nullptr);
  store_ = RendezvousStore();
  checkpoints_ = std::make_unique<CheckpointCoordinator>(options_.checkpoint, options_.num_workers,
                                                         static_cast<ClusterLink*>(this), &store_,
                                                         monitor());
  PS_RETURN_IF_ERROR(checkpoints_->LoadRestore());
  std::vector<RpcRequest> held = std::move(deferred_);
  deferred_.clear();
  const bool was_new = options_.new_job;
  options_.new_job = true;  // the journal found is not this job's
  absl::Status st = OpenJournal();
  options_.new_job = was_new;
  for (RpcRequest& r : held) Handle(std::move(r));
  return st;
}

absl::StatusOr<std::string> ArchivePreviousJob(const std::string& dir) {
  namespace fs = std::filesystem;
  std::error_code ec;
  std::vector<fs::path> old;
  for (const fs::directory_entry& e : fs::directory_iterator(dir, ec)) {
    const std::string name = e.path().filename().string();
    if (name == "coordinator.journal" || name == "LATEST" || absl::StartsWith(name, "ckpt-")) {
      old.push_back(e.path());
    }
  }
  if (ec) return absl::InternalError(absl::StrCat("listing ", dir, ": ", ec.message()));
  if (old.empty()) return std::string();
  const std::string to =
      absl::StrCat(dir, "/previous-", absl::FormatTime("%Y%m%dT%H%M%S", absl::Now(), absl::UTCTimeZone()));
  fs::create_directories(to, ec);
  if (ec) return absl::InternalError(absl::StrCat("creating ", to, ": ", ec.message()));
  for (const fs::path& p : old) {
    fs::rename(p, fs::path(to) / p.filename(), ec);
    if (ec) {
      return absl::InternalError(absl::StrCat("moving ", p.string(), " to ", to, ": ", ec.message()));
    }
  }
  return to;
}

}  // namespace pstrain::server
