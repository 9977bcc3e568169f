#include "server/coordinator/checkpoint_manager.h"

#include <algorithm>
#include <filesystem>
#include <stdexcept>

#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/strip.h"
#include "common/file_util.h"
#include "common/status.h"

namespace pstrain::server {
namespace {

using nlohmann::json;
namespace fs = std::filesystem;

json SpecJson(const TableSpec& t) {
  const OptimizerConfig& o = t.optimizer;
  json j{{"id", t.id}, {"name", t.name}, {"kind", t.kind == TableKind::kSparse ? "sparse" : "dense"},
              {"size", t.size}, {"dim", t.dim}, {"on_workers", t.on_workers},
              {"optimizer", {{"kind", static_cast<int>(o.kind)}, {"lr", o.lr}, {"momentum", o.momentum},
                             {"nesterov", o.nesterov}, {"weight_decay", o.weight_decay}, {"eps", o.eps},
                             {"initial_accumulator", o.initial_accumulator}, {"beta1", o.beta1},
                             {"beta2", o.beta2}, {"ftrl_beta", o.ftrl_beta}, {"ftrl_l1", o.ftrl_l1},
                             {"ftrl_l2", o.ftrl_l2}, {"warmup_steps", o.warmup_steps},
                             {"decay_start", o.decay_start}, {"decay_steps", o.decay_steps},
                             {"decay_end", o.decay_end}}},
              {"init", {{"kind", static_cast<int>(t.init.kind)}, {"scale", t.init.scale}, {"seed", t.init.seed}}}};
  // Only when set, so manifests of jobs without admission read as before.
  const AdmissionConfig& a = t.admission;
  if (a.enabled()) {
    j["admission"] = {{"min_count", a.min_count},
                      {"admit_probability", a.admit_probability},
                      {"sketch_bytes", a.sketch_bytes}};
  }
  const EvictionConfig& e = t.eviction;
  if (e.enabled()) {
    j["eviction"] = {{"max_rows", e.max_rows},
                     {"policy", e.policy == EvictPolicy::kLfu ? "lfu" : "lru"},
                     {"ttl_steps", e.ttl_steps}};
  }
  if (t.dtype != RowDtype::kFloat32) j["dtype"] = RowDtypeName(t.dtype);
  if (t.zero_untrained) j["untrained_rows"] = "zeros";
  return j;
}

TableSpec SpecFromJson(const json& j) {
  TableSpec t;
  t.id = j.at("id").get<uint32_t>();
  t.name = j.at("name").get<std::string>();
  t.kind = j.at("kind").get<std::string>() == "sparse" ? TableKind::kSparse : TableKind::kDense;
  t.size = j.at("size").get<uint64_t>();
  t.dim = j.at("dim").get<uint32_t>();
  t.on_workers = j.value("on_workers", false);
  const json& o = j.at("optimizer");
  t.optimizer.kind = static_cast<OptimizerKind>(o.at("kind").get<int>());
  t.optimizer.lr = o.at("lr").get<float>();
  t.optimizer.momentum = o.at("momentum").get<float>();
  t.optimizer.nesterov = o.at("nesterov").get<bool>();
  t.optimizer.weight_decay = o.at("weight_decay").get<float>();
  t.optimizer.eps = o.at("eps").get<float>();
  t.optimizer.initial_accumulator = o.at("initial_accumulator").get<float>();
  t.optimizer.beta1 = o.at("beta1").get<float>();
  t.optimizer.beta2 = o.at("beta2").get<float>();
  t.optimizer.ftrl_beta = o.at("ftrl_beta").get<float>();
  t.optimizer.ftrl_l1 = o.at("ftrl_l1").get<float>();
  t.optimizer.ftrl_l2 = o.at("ftrl_l2").get<float>();
  t.optimizer.warmup_steps = o.value("warmup_steps", 0);
  t.optimizer.decay_start = o.value("decay_start", int64_t{0});
  t.optimizer.decay_steps = o.value("decay_steps", int64_t{0});
  t.optimizer.decay_end = o.value("decay_end", 0.0f);
  const json& i = j.at("init");
  t.init.kind = static_cast<InitKind>(i.at("kind").get<int>());
  t.init.scale = i.at("scale").get<float>();
  t.init.seed = i.at("seed").get<uint64_t>();
  if (j.contains("admission")) {
    const json& a = j.at("admission");
    t.admission.min_count = a.value("min_count", 1u);
    t.admission.admit_probability = a.value("admit_probability", 1.0f);
    t.admission.sketch_bytes = a.value("sketch_bytes", uint64_t{1} << 20);
  }
  if (j.contains("eviction")) {
    const json& e = j.at("eviction");
    t.eviction.max_rows = e.value("max_rows", uint64_t{0});
    t.eviction.policy = e.value("policy", std::string("lru")) == "lfu" ? EvictPolicy::kLfu
                                                                      : EvictPolicy::kLru;
    t.eviction.ttl_steps = e.value("ttl_steps", uint64_t{0});
  }
  t.zero_untrained = j.value("untrained_rows", std::string("initializer")) == "zeros";
  if (j.contains("dtype")) {
    const std::string name = j.at("dtype").get<std::string>();
    if (!ParseRowDtype(name, &t.dtype)) {
      throw std::invalid_argument("table " + t.name + ": unknown dtype \"" + name + "\"");
    }
  }
  return t;
}

bool SafeFileName(const std::string& f) {
  return !f.empty() && f.find('/') == std::string::npos && f != "." && f != "..";
}

}  // namespace

std::string CheckpointName(int64_t step) { return absl::StrFormat("ckpt-%09d", step); }

absl::StatusOr<Manifest> ReadManifest(const std::string& checkpoint_path) {
  std::string path = checkpoint_path + "/manifest.json";
  PS_ASSIGN_OR_RETURN(std::string text, ReadFileToString(path));
  json j = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object() || j.value("format", "") != "pstrain-checkpoint") {
    return absl::DataLossError(absl::StrCat(path, ": not a pstrain checkpoint manifest"));
  }
  if (j.value("version", 0) != 1) {
    return absl::FailedPreconditionError(absl::StrCat(path, ": unsupported manifest version"));
  }
  Manifest m;
  m.path = checkpoint_path;
  try {
    m.step = j.at("step").get<int64_t>();
    m.time = j.value("time", "");
    m.num_servers = j.at("num_servers").get<int>();
    m.num_workers = j.at("num_workers").get<int>();
    for (const json& t : j.at("tables")) m.tables.push_back(SpecFromJson(t));
    for (const json& s : j.at("shards")) {
      ShardEntry e{s.at("rank").get<int>(), s.at("file").get<std::string>(),
                   s.at("bytes").get<uint64_t>(), s.at("checksum").get<std::string>()};
      if (!SafeFileName(e.file)) return absl::DataLossError(absl::StrCat(path, ": bad file name ", e.file));
      m.shards.push_back(e);
    }
    for (const json& w : j.at("workers")) {
      proto::WorkerPosition p;
      p.rank = w.at("rank").get<int32_t>();
      p.clock = w.at("clock").get<int64_t>();
      p.epoch = w.at("epoch").get<int32_t>();
      p.rows = w.at("rows").get<int64_t>();
      p.finished = w.at("finished").get<bool>();
      p.samples = w.value("samples", int64_t{0});  // older manifests: not recorded
      p.state_file = w.value("state_file", "");
      p.state_checksum = w.value("state_checksum", "");
      p.inputs = w.value("inputs", "");  // older manifests: not recorded
      if (w.contains("data_position")) {  // older manifests, streams: none
        const json& at = w.at("data_position");
        p.source_range = at.at("range").get<int32_t>();
        p.source_row_group = at.value("row_group", int32_t{-1});
        p.source_row = at.value("row", int64_t{0});
        p.source_offset = at.value("offset", int64_t{-1});
        p.source_file = at.value("file", "");
        if (p.source_range < 0 || p.source_row < 0) {
          return absl::DataLossError(absl::StrCat(path, ": worker ", p.rank, ": bad data_position"));
        }
      }
      if (!p.state_file.empty() && !SafeFileName(p.state_file)) {
        return absl::DataLossError(absl::StrCat(path, ": bad file name ", p.state_file));
      }
      m.workers.push_back(p);
    }
  } catch (const json::exception& e) {
    return absl::DataLossError(absl::StrCat(path, ": ", e.what()));
  } catch (const std::invalid_argument& e) {
    return absl::DataLossError(absl::StrCat(path, ": ", e.what()));
  }
  if (static_cast<int>(m.shards.size()) != m.num_servers) {
    return absl::DataLossError(absl::StrCat(path, ": ", m.shards.size(), " shard files for ",
                                            m.num_servers, " servers"));
  }
  for (const ShardEntry& e : m.shards) {
    std::error_code ec;
    uint64_t size = fs::file_size(checkpoint_path + "/" + e.file, ec);
    if (ec || size != e.bytes) {
      return absl::DataLossError(absl::StrCat(checkpoint_path, "/", e.file,
                                              ec ? ": missing" : ": has the wrong size"));
    }
  }
  return m;
}

absl::StatusOr<std::optional<Manifest>> CheckpointManager::FindRestore() const {
  const std::string& r = options_.restore;
  if (r == "none" || r.empty()) return std::optional<Manifest>();
  std::string path;
  if (r == "auto" || r == "latest") {
    if (options_.dir.empty()) {
      if (r == "latest") return absl::InvalidArgumentError("--restore=latest needs --checkpoint_dir");
      return std::optional<Manifest>();
    }
    auto latest = ReadFileToString(options_.dir + "/LATEST");
    if (!latest.ok()) {
      if (r == "latest" || latest.status().code() != absl::StatusCode::kNotFound) {
        return Annotate(latest.status(), "no checkpoint to restore");
      }
      return std::optional<Manifest>();
    }
    std::string name(absl::StripAsciiWhitespace(*latest));
    if (!SafeFileName(name)) return absl::DataLossError(absl::StrCat(options_.dir, "/LATEST is corrupt"));
    path = options_.dir + "/" + name;
  } else {
    path = r;
  }
  PS_ASSIGN_OR_RETURN(Manifest m, ReadManifest(path));
  return std::optional<Manifest>(std::move(m));
}

absl::StatusOr<std::optional<Manifest>> CheckpointManager::FindLatest() const {
  if (options_.dir.empty()) return std::optional<Manifest>();
  auto latest = ReadFileToString(options_.dir + "/LATEST");
  if (!latest.ok()) {
    if (latest.status().code() == absl::StatusCode::kNotFound) return std::optional<Manifest>();
    return latest.status();
  }
  std::string name(absl::StripAsciiWhitespace(*latest));
  if (!SafeFileName(name)) return absl::DataLossError(absl::StrCat(options_.dir, "/LATEST is corrupt"));
  PS_ASSIGN_OR_RETURN(Manifest m, ReadManifest(options_.dir + "/" + name));
  return std::optional<Manifest>(std::move(m));
}

absl::StatusOr<std::string> CheckpointManager::Prepare(int64_t step) {
  std::string path = options_.dir + "/" + CheckpointName(step);
  std::error_code ec;
  fs::remove(path + "/manifest.json", ec);  // a leftover of an earlier, failed attempt
  PS_RETURN_IF_ERROR(MakeDirs(path));
  return path;
}

absl::Status CheckpointManager::Commit(const Manifest& m) {
  json shards = json::array();
  for (const ShardEntry& e : m.shards) {
    shards.push_back({{"rank", e.rank}, {"file", e.file}, {"bytes", e.bytes}, {"checksum", e.checksum}});
  }
  json workers = json::array();
  for (const proto::WorkerPosition& p : m.workers) {
    json w = {{"rank", p.rank}, {"clock", p.clock}, {"epoch", p.epoch}, {"rows", p.rows},
              {"samples", p.samples}, {"finished", p.finished}, {"state_file", p.state_file},
              {"state_checksum", p.state_checksum}, {"inputs", p.inputs}};
    if (p.source_range >= 0) {
      // Where the worker's next row is: range of its shard, file, row group
      // and row in it (Parquet) or a line's byte offset (text), for a resume
      // to start reading there.
      w["data_position"] = {{"range", p.source_range}, {"file", p.source_file},
                            {"row_group", p.source_row_group}, {"row", p.source_row},
                            {"offset", p.source_offset}};
    }
    workers.push_back(std::move(w));
  }
  json tables = json::array();
  for (const TableSpec& t : m.tables) tables.push_back(SpecJson(t));
  json j{{"format", "pstrain-checkpoint"}, {"version", 1}, {"step", m.step},
         {"time", m.time}, {"num_servers", m.num_servers}, {"num_workers", m.num_workers},
         {"tables", tables}, {"shards", shards}, {"workers", workers}};
  PS_RETURN_IF_ERROR(WriteFileAtomically(m.path + "/manifest.json", j.dump(2) + "\n"));
  std::string name = fs::path(m.path).filename().string();
  PS_RETURN_IF_ERROR(WriteFileAtomically(options_.dir + "/LATEST", name + "\n"));
  // Prune: keep the newest `keep` complete checkpoints; drop incomplete ones
  // older than this one.
  std::vector<std::string> complete;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(options_.dir, ec)) {
    std::string n = entry.path().filename().string();
    if (n.rfind("ckpt-", 0) != 0 || !entry.is_directory()) continue;
    if (fs::exists(entry.path() / "manifest.json")) {
      complete.push_back(n);
    } else if (n < name) {
      fs::remove_all(entry.path(), ec);
    }
  }
  std::sort(complete.begin(), complete.end());
  int keep = std::max(1, options_.keep);
  for (size_t i = 0; i + keep < complete.size(); ++i) {
    fs::remove_all(fs::path(options_.dir) / complete[i], ec);
    spdlog::info("removed old checkpoint {}", complete[i]);
  }
  return absl::OkStatus();
}

}  // namespace pstrain::server
