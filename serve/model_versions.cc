#include "serve/model_versions.h"

#include <charconv>
#include <filesystem>
#include <map>

#include <nlohmann/json.hpp>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/file_util.h"
#include "common/status.h"

namespace pstrain::worker {
namespace {

namespace fs = std::filesystem;

constexpr char kLatest[] = "LATEST";

// The seq of a version folder's name ("v00000012"); 0 when it is not one.
uint64_t SeqOfName(const std::string& name) {
  if (name.size() < 2 || name[0] != 'v') return 0;
  uint64_t seq = 0;
  const char* end = name.data() + name.size();
  auto [p, ec] = std::from_chars(name.data() + 1, end, seq);
  return ec == std::errc() && p == end ? seq : 0;
}

}  // namespace

std::string VersionName(uint64_t seq) { return absl::StrFormat("v%08d", seq); }

bool IsVersionedExport(const std::string& dir) {
  std::error_code ec;
  return fs::exists(fs::path(dir) / kLatest, ec);
}

absl::StatusOr<uint64_t> ReadLatest(const std::string& dir) {
  const std::string path = dir + "/" + kLatest;
  std::error_code ec;
  if (!fs::exists(path, ec)) return absl::NotFoundError(absl::StrCat(path, ": no such file"));
  PS_ASSIGN_OR_RETURN(std::string text, ReadFileToString(path));
  const uint64_t seq = SeqOfName(std::string(absl::StripAsciiWhitespace(text)));
  if (seq == 0) {
    return absl::DataLossError(absl::StrCat(path, ": does not name a version (\"",
                                            absl::StripAsciiWhitespace(text), "\")"));
  }
  return seq;
}

absl::StatusOr<SavedModel> ReadVersion(const std::string& dir, uint64_t seq) {
  const std::string path = dir + "/" + VersionName(seq);
  PS_ASSIGN_OR_RETURN(SavedModel m, ReadModel(path));
  if (m.exported.seq != seq) {
    return absl::DataLossError(absl::StrCat(path, "/model.json: not version ", seq, " (it says ",
                                            m.exported.seq, ")"));
  }
  return m;
}

absl::StatusOr<ExportInfo> ReadVersionInfo(const std::string& dir, uint64_t seq) {
  const std::string path = dir + "/" + VersionName(seq) + "/model.json";
  PS_ASSIGN_OR_RETURN(std::string text, ReadFileToString(path));
  nlohmann::json manifest = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (manifest.is_discarded() || !manifest.is_object() || !manifest.contains("export") ||
      !manifest["export"].is_object()) {
    return absl::DataLossError(absl::StrCat(path, ": not a version of an export folder"));
  }
  const nlohmann::json& x = manifest["export"];
  ExportInfo info;
  try {
    info.seq = x.at("seq").get<uint64_t>();
    info.base = x.at("base").get<uint64_t>();
    info.delta = x.at("kind").get<std::string>() == "delta";
    info.exported_unix_ms = x.value("exported_unix_ms", int64_t{0});
  } catch (const nlohmann::json::exception& e) {
    return absl::DataLossError(absl::StrCat(path, ": ", e.what()));
  }
  if (info.seq != seq || info.base == 0 || info.base > seq || info.delta == (info.base == seq)) {
    return absl::DataLossError(absl::StrCat(path, ": inconsistent export entry"));
  }
  return info;
}

absl::Status WriteVersion(const std::string& dir, const SavedModel& model) {
  const uint64_t seq = model.exported.seq;
  if (seq == 0) return absl::InvalidArgumentError("a version needs a seq");
  PS_RETURN_IF_ERROR(MakeDirs(dir));
  const std::string name = VersionName(seq);
  const std::string final_dir = dir + "/" + name;
  const std::string tmp = final_dir + ".tmp";
  std::error_code ec;
  fs::remove_all(tmp, ec);        // a crashed writer's
  fs::remove_all(final_dir, ec);  // written, but never named in LATEST
  PS_RETURN_IF_ERROR(WriteModel(tmp, model));
  fs::rename(tmp, final_dir, ec);
  if (ec) {
    return absl::InternalError(absl::StrCat("renaming ", tmp, " to ", final_dir, ": ", ec.message()));
  }
  return WriteFileAtomically(dir + "/" + kLatest, name + "\n");  // fsyncs the folder too
}

uint64_t VersionBytes(const std::string& dir, uint64_t seq) {
  uint64_t bytes = 0;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir + "/" + VersionName(seq), ec)) {
    if (e.is_regular_file(ec)) bytes += e.file_size(ec);
  }
  return bytes;
}

absl::StatusOr<int> PruneVersions(const std::string& dir, int keep_bases) {
  PS_ASSIGN_OR_RETURN(uint64_t latest, ReadLatest(dir));
  std::map<uint64_t, std::string> versions;
  std::vector<fs::path> leftovers;
  std::error_code ec;
  for (const fs::directory_entry& e : fs::directory_iterator(dir, ec)) {
    const std::string name = e.path().filename().string();
    if (absl::EndsWith(name, ".tmp")) {
      if (SeqOfName(name.substr(0, name.size() - 4)) > latest) continue;  // being written
      leftovers.push_back(e.path());
    } else if (uint64_t seq = SeqOfName(name); seq > 0 && seq <= latest) {
      versions[seq] = name;
    }
  }
  if (ec) return absl::InternalError(absl::StrCat("listing ", dir, ": ", ec.message()));
  // Newest first: the keep_bases-th base found is the oldest kept.
  uint64_t oldest_kept = 0;
  int bases = 0;
  for (auto it = versions.rbegin(); it != versions.rend() && bases < keep_bases; ++it) {
    absl::StatusOr<ExportInfo> info = ReadVersionInfo(dir, it->first);
    if (info.ok() && !info->delta) {
      ++bases;
      oldest_kept = it->first;
    }
  }
  int removed = 0;
  if (bases == keep_bases) {
    for (const auto& [seq, name] : versions) {
      if (seq >= oldest_kept) break;
      fs::remove_all(fs::path(dir) / name, ec);
      if (!ec) ++removed;
    }
  }
  for (const fs::path& p : leftovers) fs::remove_all(p, ec);
  return removed;
}

absl::Status ApplyDelta(SavedModel* model, const SavedModel& delta) {
  if (!delta.exported.delta || delta.exported.seq != model->exported.seq + 1 ||
      delta.exported.base != model->exported.base) {
    return absl::FailedPreconditionError(absl::StrCat(
        "version ", delta.exported.seq, " is not a delta on top of version ", model->exported.seq,
        " (base ", model->exported.base, ")"));
  }
  if (delta.tables.size() != model->tables.size()) {
    return absl::FailedPreconditionError(
        absl::StrCat("version ", delta.exported.seq, " has other tables"));
  }
  for (size_t i = 0; i < delta.tables.size(); ++i) {
    const TableValues& d = delta.tables[i];
    TableValues& t = model->tables[i];
    if (d.spec.name != t.spec.name || d.spec.kind != t.spec.kind || d.spec.dim != t.spec.dim) {
      return absl::FailedPreconditionError(absl::StrCat(
          "version ", delta.exported.seq, ": table ", i, " is ", d.spec.name, ", not ", t.spec.name));
    }
    if (t.spec.kind == TableKind::kDense) {
      t.dense = d.dense;
      continue;
    }
    const size_t dim = t.spec.dim;
    absl::flat_hash_map<uint64_t, size_t> row_of;
    row_of.reserve(t.ids.size() + d.ids.size());
    for (size_t r = 0; r < t.ids.size(); ++r) row_of[t.ids[r]] = r;
    for (size_t k = 0; k < d.ids.size(); ++k) {
      auto [it, fresh] = row_of.try_emplace(d.ids[k], t.ids.size());
      if (fresh) {
        t.ids.push_back(d.ids[k]);
        t.rows.resize(t.rows.size() + dim);
      }
      std::copy_n(d.rows.data() + k * dim, dim, t.rows.data() + it->second * dim);
    }
    if (!d.removed.empty()) {
      absl::flat_hash_map<uint64_t, bool> gone;
      for (uint64_t id : d.removed) gone[id] = true;
      size_t w = 0;
      for (size_t r = 0; r < t.ids.size(); ++r) {
        if (gone.contains(t.ids[r])) continue;
        if (w != r) {
          t.ids[w] = t.ids[r];
          std::copy_n(t.rows.data() + r * dim, dim, t.rows.data() + w * dim);
        }
        ++w;
      }
      t.ids.resize(w);
      t.rows.resize(w * dim);
    }
  }
  model->step = delta.step;
  model->exported = delta.exported;
  return absl::OkStatus();
}

absl::StatusOr<SavedModel> ReadVersionedModel(const std::string& dir, uint64_t seq) {
  if (seq == 0) {
    PS_ASSIGN_OR_RETURN(seq, ReadLatest(dir));
  }
  PS_ASSIGN_OR_RETURN(ExportInfo info, ReadVersionInfo(dir, seq));
  PS_ASSIGN_OR_RETURN(SavedModel model, ReadVersion(dir, info.base));
  for (uint64_t s = info.base + 1; s <= seq; ++s) {
    PS_ASSIGN_OR_RETURN(SavedModel delta, ReadVersion(dir, s));
    PS_RETURN_IF_ERROR(Annotate(ApplyDelta(&model, delta), dir));
  }
  return model;
}

}  // namespace pstrain::worker
