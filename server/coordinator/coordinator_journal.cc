#include "server/coordinator/coordinator_journal.h"

#include <errno.h>
#include <fcntl.h>
#include <unistd.h>

#include <cstring>
#include <sstream>

#include <spdlog/spdlog.h>

#include "absl/strings/str_cat.h"
#include "common/checksum.h"
#include "common/file_util.h"
#include "common/status.h"

namespace pstrain::server {

namespace {
constexpr uint32_t kRecordMagic = 0x314a5350;  // "PSJ1" little-endian
constexpr size_t kFrameBytes = 16;             // magic, length, checksum
// A record is small (a store value, the layout); past this a length is damage.
constexpr uint32_t kMaxRecordBytes = 256u << 20;

enum class Kind : uint8_t { kSnapshot = 1, kMember, kIdentity, kEpoch, kTables, kStore, kCheckpoints, kEnd };

void PutU32(std::string* s, uint32_t v) {
  for (int i = 0; i < 4; ++i) s->push_back(static_cast<char>(v >> (8 * i)));
}
void PutU64(std::string* s, uint64_t v) {
  for (int i = 0; i < 8; ++i) s->push_back(static_cast<char>(v >> (8 * i)));
}
uint64_t GetLe(const char* p, int n) {
  uint64_t v = 0;
  for (int i = n - 1; i >= 0; --i) v = (v << 8) | static_cast<uint8_t>(p[i]);
  return v;
}
uint64_t Digest(const std::string& payload) {
  Checksum64 c;
  c.Update(payload.data(), payload.size());
  return c.Digest();
}
std::string NowUtc() {
  return absl::FormatTime("%Y-%m-%dT%H:%M:%SZ", absl::Now(), absl::UTCTimeZone());
}

}  // namespace

// One change (or, kSnapshot, the whole state).
struct CoordinatorJournal::Record {
  Kind kind = Kind::kSnapshot;
  JobJournal snapshot;
  proto::Role role = proto::Role::kUnknown;
  JournalMember member;
  JournalIdentity identity;
  uint64_t epoch = 0;
  std::vector<TableSpec> tables;
  bool has_layout = false;
  proto::TableLayout layout;
  JournalStoreEntry entry;
  bool erase = false;
  CheckpointJournal checkpoints;
  JobState state = JobState::kRunning;
  int64_t final_step = 0;
  std::string message, when;

  template <class Archive>
  void serialize(Archive& ar, std::uint32_t /*version*/) {
    ar(kind);
    switch (kind) {
      case Kind::kSnapshot: ar(snapshot); return;
      case Kind::kMember: ar(role, member); return;
      case Kind::kIdentity: ar(identity); return;
      case Kind::kEpoch: ar(epoch); return;
      case Kind::kTables: ar(tables, has_layout, layout); return;
      case Kind::kStore: ar(entry, erase); return;
      case Kind::kCheckpoints: ar(checkpoints); return;
      case Kind::kEnd: ar(state, final_step, message, when); return;
    }
    throw cereal::Exception("unknown journal record kind");
  }

  // Applies this record to `s`; false when it does not fit the state.
  bool ApplyTo(JobJournal* s) const {
    switch (kind) {
      case Kind::kSnapshot: *s = snapshot; return true;
      case Kind::kMember: {
        auto& slots = role == proto::Role::kServer ? s->servers : s->workers;
        const int32_t r = member.info.rank;
        if (r < 0 || r >= static_cast<int32_t>(slots.size())) return false;
        slots[r] = member;
        return true;
      }
      case Kind::kIdentity:
        for (JournalIdentity& i : s->identities) {
          if (i.node_id == identity.node_id) {
            i.rank = identity.rank;
            return true;
          }
        }
        s->identities.push_back(identity);
        return true;
      case Kind::kEpoch: s->epoch = epoch; return true;
      case Kind::kTables:
        s->tables = tables;
        s->has_layout = has_layout;
        s->layout = layout;
        return true;
      case Kind::kStore:
        if (erase) {
          std::erase_if(s->store, [&](const JournalStoreEntry& e) { return e.key == entry.key; });
          return true;
        }
        for (JournalStoreEntry& e : s->store) {
          if (e.key == entry.key) {
            e.value = entry.value;
            return true;
          }
        }
        s->store.push_back(entry);
        return true;
      case Kind::kCheckpoints: s->checkpoints = checkpoints; return true;
      case Kind::kEnd:
        s->state = state;
        s->final_step = final_step;
        s->end_message = message;
        s->ended = when;
        return true;
    }
    return false;
  }
};

}  // namespace pstrain::server

CEREAL_CLASS_VERSION(pstrain::server::CoordinatorJournal::Record, 1);

namespace pstrain::server {

std::string CoordinatorJournal::PathIn(const std::string& checkpoint_dir) {
  return checkpoint_dir + "/coordinator.journal";
}

absl::StatusOr<std::optional<JobJournal>> CoordinatorJournal::Load(const std::string& path) {
  if (access(path.c_str(), F_OK) != 0) return std::optional<JobJournal>();
  PS_ASSIGN_OR_RETURN(std::string bytes, ReadFileToString(path));
  JobJournal state;
  size_t at = 0;
  int records = 0;
  auto damaged = [&](const std::string& what) {
    return absl::DataLossError(absl::StrCat("coordinator journal ", path, " is damaged at byte ", at,
                                            " (record ", records + 1, "): ", what,
                                            "; move it away to start the job over from its "
                                            "latest checkpoint"));
  };
  while (at < bytes.size()) {
    if (bytes.size() - at < kFrameBytes) break;  // a torn last frame
    const char* p = bytes.data() + at;
    if (GetLe(p, 4) != kRecordMagic) return damaged("bad record magic");
    const uint64_t length = GetLe(p + 4, 4);
    if (length > kMaxRecordBytes) return damaged(absl::StrCat("record length ", length));
    if (bytes.size() - at - kFrameBytes < length) break;  // a torn last record
    std::string payload = bytes.substr(at + kFrameBytes, length);
    if (Digest(payload) != GetLe(p + 8, 8)) return damaged("checksum mismatch");
    Record r;
    proto_internal::SpanStreamBuf buf(payload.data(), payload.size());
    std::istream is(&buf);
    proto_internal::tl_decode_buf = &buf;
    try {
      cereal::PortableBinaryInputArchive ar(is);
      ar(r);
    } catch (const std::exception& e) {
      proto_internal::tl_decode_buf = nullptr;
      return damaged(absl::StrCat("undecodable record: ", e.what()));
    }
    proto_internal::tl_decode_buf = nullptr;
    if (records == 0 && r.kind != Kind::kSnapshot) return damaged("it does not start with a snapshot");
    if (!r.ApplyTo(&state)) return damaged("a record that does not fit the job");
    at += kFrameBytes + length;
    ++records;
  }
  if (records == 0) return damaged("no complete record");
  if (at < bytes.size()) {
    spdlog::warn("coordinator journal {}: the last {} bytes are a record cut short (a crash while "
                 "it was written; never acknowledged): ignored",
                 path, bytes.size() - at);
  }
  return std::optional<JobJournal>(std::move(state));
}

absl::StatusOr<std::unique_ptr<CoordinatorJournal>> CoordinatorJournal::Create(
    const std::string& path, JobJournal state) {
  if (state.started.empty()) state.started = NowUtc();
  std::unique_ptr<CoordinatorJournal> j(new CoordinatorJournal(path, std::move(state)));
  PS_RETURN_IF_ERROR(j->WriteSnapshot());
  return j;
}

CoordinatorJournal::~CoordinatorJournal() {
  if (fd_ >= 0) close(fd_);
}

absl::Status CoordinatorJournal::WriteSnapshot() {
  Record r;
  r.kind = Kind::kSnapshot;
  r.snapshot = state_;
  std::string framed = Frame(r);
  PS_RETURN_IF_ERROR(WriteFileAtomically(path_, framed));
  if (fd_ >= 0) close(fd_);
  fd_ = open(path_.c_str(), O_WRONLY | O_APPEND | O_CLOEXEC);
  if (fd_ < 0) return ErrnoToStatus(errno, "open " + path_);
  bytes_ = framed.size();
  return absl::OkStatus();
}

absl::Status CoordinatorJournal::Append(const Record& record) {
  if (!record.ApplyTo(&state_)) {
    return absl::InvalidArgumentError("journal record does not fit the job");
  }
  if (fd_ < 0) return absl::FailedPreconditionError("journal " + path_ + " is not open");
  if (bytes_ > kCompactBytes) return WriteSnapshot();
  std::string framed = Frame(record);
  size_t done = 0;
  while (done < framed.size()) {
    ssize_t n = write(fd_, framed.data() + done, framed.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return ErrnoToStatus(errno, "append to " + path_);
    done += static_cast<size_t>(n);
  }
  if (fdatasync(fd_) != 0) return ErrnoToStatus(errno, "fdatasync " + path_);
  bytes_ += framed.size();
  return absl::OkStatus();
}

absl::Status CoordinatorJournal::SetMember(proto::Role role, const JournalMember& member) {
  Record r;
  r.kind = Kind::kMember;
  r.role = role;
  r.member = member;
  return Append(r);
}

absl::Status CoordinatorJournal::SetIdentity(const std::string& node_id, int32_t rank) {
  Record r;
  r.kind = Kind::kIdentity;
  r.identity = {node_id, rank};
  return Append(r);
}

absl::Status CoordinatorJournal::SetEpoch(uint64_t epoch) {
  Record r;
  r.kind = Kind::kEpoch;
  r.epoch = epoch;
  return Append(r);
}

absl::Status CoordinatorJournal::SetTables(const std::vector<TableSpec>& tables,
                                           const proto::TableLayout* layout) {
  Record r;
  r.kind = Kind::kTables;
  r.tables = tables;
  r.has_layout = layout != nullptr;
  if (layout != nullptr) r.layout = *layout;
  return Append(r);
}

absl::Status CoordinatorJournal::SetStore(const std::string& key, const std::string& value) {
  Record r;
  r.kind = Kind::kStore;
  r.entry = {key, value};
  return Append(r);
}

absl::Status CoordinatorJournal::EraseStore(const std::string& key) {
  Record r;
  r.kind = Kind::kStore;
  r.entry.key = key;
  r.erase = true;
  return Append(r);
}

absl::Status CoordinatorJournal::SetCheckpoints(const CheckpointJournal& checkpoints) {
  Record r;
  r.kind = Kind::kCheckpoints;
  r.checkpoints = checkpoints;
  return Append(r);
}

absl::Status CoordinatorJournal::End(JobState state, int64_t final_step, const std::string& message) {
  Record r;
  r.kind = Kind::kEnd;
  r.state = state;
  r.final_step = final_step;
  r.message = message;
  r.when = NowUtc();
  return Append(r);
}

std::string CoordinatorJournal::Frame(const Record& r) {
  std::ostringstream os(std::ios::binary);
  {
    cereal::PortableBinaryOutputArchive ar(os);
    ar(r);
  }
  std::string payload = std::move(os).str();
  std::string framed;
  framed.reserve(kFrameBytes + payload.size());
  PutU32(&framed, kRecordMagic);
  PutU32(&framed, static_cast<uint32_t>(payload.size()));
  PutU64(&framed, Digest(payload));
  framed += payload;
  return framed;
}

}  // namespace pstrain::server
