#include "serve/model_io.h"

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/checkpoint/checked_file.h"
#include "common/file_util.h"
#include "common/status.h"
#include "data/schema_file.h"
#include "model/graph/model_graph.h"
#include "model/models/table_registry.h"

namespace pstrain::worker {
namespace {

using nlohmann::json;

constexpr FileKind kTableFile{"PSTRTBL1", "table file"};
constexpr FileKind kRemovedFile{"PSTRDEL1", "removed-ids file"};
constexpr uint32_t kVersion = 1;

// After the magic.
struct TableHeader {
  uint32_t version;
  uint8_t kind;
  uint8_t pad[3];
  uint32_t dim;
  uint32_t reserved;
  uint64_t count;
};
static_assert(sizeof(TableHeader) == 24);

std::string TableFile(const TableSpec& spec) { return spec.name + ".tbl"; }

json ModelJson(const ModelOptions& m, const Schema& s) {
  json out{{"name", m.name},
              {"num_dense", m.num_dense},
              {"num_sparse", m.num_sparse},
              {"embedding_dim", m.embedding_dim},
              {"bottom_mlp", m.bottom_mlp},
              {"top_mlp", m.top_mlp},
              {"deep_mlp", m.deep_mlp},
              {"seed", m.seed},
              {"embedding_init", EmbeddingInitText(m.embedding_init)},
              {"hash_buckets", s.hash_buckets},
              {"multi_hot_sep", std::string(s.multi_hot_sep ? 1 : 0, s.multi_hot_sep)},
              {"field_sep", std::string(1, s.field_sep)},
              {"header", s.header},
              {"max_line_bytes", s.max_line_bytes},
              {"missing_values", s.missing_tokens}};
  if (!m.table_init.empty()) {
    json inits = json::array();
    for (const auto& [table, init] : m.table_init) inits.push_back({table, EmbeddingInitText(init)});
    out["table_init"] = inits;
  }
  // The columns of a custom layout, as a schema file states them.
  if (s.custom) out["schema"] = SchemaJson(s);
  // A model file's network, as the file was written.
  if (m.graph != nullptr) out["graph"] = m.graph->text;
  return out;
}

absl::Status WriteTable(const std::string& path, const TableValues& t, json* entry) {
  PS_ASSIGN_OR_RETURN(auto w, CheckedFileWriter::Open(path, kTableFile));
  TableHeader h{};
  h.version = kVersion;
  bool sparse = t.spec.kind == TableKind::kSparse;
  h.kind = sparse ? 1 : 0;
  h.dim = sparse ? t.spec.dim : 0;
  h.count = sparse ? t.ids.size() : t.dense.size();
  if (sparse && t.rows.size() != t.ids.size() * t.spec.dim) {
    return absl::InvalidArgumentError(absl::StrCat("table ", t.spec.name, ": rows do not match ids"));
  }
  if (!sparse && t.dense.size() != t.spec.size) {
    return absl::InvalidArgumentError(absl::StrCat("table ", t.spec.name, ": ", t.dense.size(),
                                                   " values for size ", t.spec.size));
  }
  PS_RETURN_IF_ERROR(w->Append(&h, sizeof(h)));
  if (sparse) {
    std::vector<char> rec(8 + 4 * t.spec.dim);
    for (size_t i = 0; i < t.ids.size(); ++i) {
      std::memcpy(rec.data(), &t.ids[i], 8);
      std::memcpy(rec.data() + 8, t.rows.data() + i * t.spec.dim, 4 * t.spec.dim);
      PS_RETURN_IF_ERROR(w->Append(rec.data(), rec.size()));
    }
  } else {
    PS_RETURN_IF_ERROR(w->Append(t.dense.data(), t.dense.size() * sizeof(float)));
  }
  const uint64_t bytes = w->bytes();
  PS_ASSIGN_OR_RETURN(const std::string checksum, w->Commit(ChecksumAt::kManifest));
  *entry = json{{"id", t.spec.id},          {"name", t.spec.name},
                {"kind", sparse ? "sparse" : "dense"},
                {"size", t.spec.size},      {"dim", t.spec.dim},
                {"rows", h.count},          {"file", TableFile(t.spec)},
                {"bytes", bytes},           {"checksum", checksum},
                {"init_kind", static_cast<int>(t.spec.init.kind)},
                {"init_scale", t.spec.init.scale},
                {"init_seed", t.spec.init.seed}};
  if (sparse) (*entry)["missing_rows"] = t.missing_as_zeros ? "zeros" : "initializer";
  return absl::OkStatus();
}

absl::Status WriteRemoved(const std::string& dir, const TableValues& t, json* entry) {
  if (t.removed.empty()) return absl::OkStatus();
  const std::string file = t.spec.name + ".removed";
  PS_ASSIGN_OR_RETURN(auto w, CheckedFileWriter::Open(dir + "/" + file, kRemovedFile));
  const uint64_t count = t.removed.size();
  PS_RETURN_IF_ERROR(w->Append(&count, sizeof(count)));
  PS_RETURN_IF_ERROR(w->Append(t.removed.data(), count * sizeof(uint64_t)));
  const uint64_t bytes = w->bytes();
  PS_ASSIGN_OR_RETURN(const std::string checksum, w->Commit(ChecksumAt::kManifest));
  (*entry)["removed"] = json{{"file", file}, {"count", count}, {"bytes", bytes},
                             {"checksum", checksum}};
  return absl::OkStatus();
}

absl::Status ReadRemoved(const std::string& path, const json& entry, TableValues* t) {
  PS_ASSIGN_OR_RETURN(const std::string data,
                      ReadCheckedFile(path, kRemovedFile, ChecksumAt::kManifest,
                                      entry.value("checksum", "")));
  auto bad = [&](const std::string& why) { return CorruptFileError(kRemovedFile, path, why); };
  uint64_t count = 0;
  if (data.size() < 8) return bad("shorter than its header");
  std::memcpy(&count, data.data(), 8);
  if (count > (data.size() - 8) / 8 || data.size() != 8 + count * 8) {
    return bad("size does not match its id count");
  }
  t->removed.resize(count);
  std::memcpy(t->removed.data(), data.data() + 8, count * 8);
  return absl::OkStatus();
}

bool SafeFileName(const std::string& file) {
  return !file.empty() && file.find('/') == std::string::npos &&
         file.find("..") == std::string::npos;
}

absl::Status ReadTable(const std::string& path, const json& entry, TableValues* t) {
  PS_ASSIGN_OR_RETURN(const std::string data,
                      ReadCheckedFile(path, kTableFile, ChecksumAt::kManifest,
                                      entry.value("checksum", "")));
  auto bad = [&](const std::string& why) { return CorruptFileError(kTableFile, path, why); };
  if (data.size() < sizeof(TableHeader)) return bad("shorter than its header");
  TableHeader h;
  std::memcpy(&h, data.data(), sizeof(h));
  if (h.version != kVersion) return bad(absl::StrCat("format version ", h.version));
  bool sparse = h.kind == 1;
  if (sparse != (t->spec.kind == TableKind::kSparse) || (sparse && h.dim != t->spec.dim)) {
    return bad("header does not match the manifest");
  }
  size_t body = data.size() - sizeof(TableHeader);
  const char* p = data.data() + sizeof(TableHeader);
  if (sparse) {
    size_t rec = 8 + 4 * size_t{h.dim};
    if (h.count > body / rec || body != h.count * rec) return bad("size does not match its row count");
    t->ids.resize(h.count);
    t->rows.resize(h.count * h.dim);
    for (uint64_t i = 0; i < h.count; ++i) {
      std::memcpy(&t->ids[i], p + i * rec, 8);
      std::memcpy(t->rows.data() + i * h.dim, p + i * rec + 8, 4 * h.dim);
    }
  } else {
    if (body != h.count * sizeof(float) || h.count != t->spec.size) {
      return bad("size does not match the table");
    }
    t->dense.resize(h.count);
    std::memcpy(t->dense.data(), p, body);
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status WriteModel(const std::string& dir, const SavedModel& model) {
  PS_RETURN_IF_ERROR(MakeDirs(dir));
  json tables = json::array();
  for (const TableValues& t : model.tables) {
    json entry;
    PS_RETURN_IF_ERROR(WriteTable(dir + "/" + TableFile(t.spec), t, &entry));
    PS_RETURN_IF_ERROR(WriteRemoved(dir, t, &entry));
    tables.push_back(std::move(entry));
  }
  json manifest{{"format", "pstrain-model"},
                {"version", 1},
                {"step", model.step},
                {"model", ModelJson(model.model, model.schema)},
                {"tables", std::move(tables)}};
  if (const ModelChoice& c = model.chosen; !c.metric.empty()) {
    manifest["kept_best"] = json{{"metric", c.metric},     {"round", c.round},
                                 {"step", c.step},         {"eval_auc", c.eval_auc},
                                 {"eval_logloss", c.eval_logloss}};
  }
  if (const ExportInfo& x = model.exported; x.seq > 0) {
    manifest["export"] = json{{"seq", x.seq},
                              {"kind", x.delta ? "delta" : "base"},
                              {"base", x.base},
                              {"exported_unix_ms", x.exported_unix_ms}};
  }
  return WriteFileAtomically(dir + "/model.json", manifest.dump(2) + "\n");
}

absl::Status ReplaceModel(const std::string& dir, const SavedModel& model,
                          std::string* in_place_reason) {
  if (in_place_reason != nullptr) in_place_reason->clear();
  std::string target = dir;
  while (target.size() > 1 && target.back() == '/') target.pop_back();
  const std::string tmp = target + ".tmp";
  std::error_code ec;
  std::filesystem::remove_all(tmp, ec);  // a crashed writer's
  absl::Status st = WriteModel(tmp, model);
  if (st.ok()) st = ReplaceDirectory(tmp, target);
  if (st.ok()) return st;
  std::filesystem::remove_all(tmp, ec);
  // A folder that cannot be swapped (a mount point, a read-only parent, a
  // file system without RENAME_EXCHANGE) still takes the files.
  if (in_place_reason != nullptr) *in_place_reason = std::string(st.message());
  return Annotate(WriteModel(target, model),
                  absl::StrCat("writing in place (", st.message(), ")"));
}

absl::StatusOr<SavedModel> ReadModel(const std::string& dir) {
  std::string manifest_path = dir + "/model.json";
  PS_ASSIGN_OR_RETURN(std::string text, ReadFileToString(manifest_path));
  json manifest = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (manifest.is_discarded() || !manifest.is_object() ||
      manifest.value("format", "") != "pstrain-model") {
    return absl::DataLossError(absl::StrCat(manifest_path, ": not a pstrain model manifest"));
  }
  if (manifest.value("version", 0) != 1) {
    return absl::FailedPreconditionError(absl::StrCat(manifest_path, ": unsupported version"));
  }
  SavedModel out;
  try {
    const json& m = manifest.at("model");
    out.model.name = m.at("name").get<std::string>();
    out.model.num_dense = m.at("num_dense").get<int>();
    out.model.num_sparse = m.at("num_sparse").get<int>();
    out.model.embedding_dim = m.at("embedding_dim").get<int>();
    out.model.bottom_mlp = m.at("bottom_mlp").get<std::vector<int>>();
    out.model.top_mlp = m.at("top_mlp").get<std::vector<int>>();
    out.model.deep_mlp = m.at("deep_mlp").get<std::vector<int>>();
    out.model.seed = m.at("seed").get<uint64_t>();
    // A model saved before --embedding_init existed started its rows at
    // U(+-1/sqrt(dim)); its unseen ids read as that.
    absl::StatusOr<EmbeddingInitSpec> init =
        ParseEmbeddingInit(m.value("embedding_init", std::string("uniform:1/sqrt(dim)")));
    if (!init.ok()) return absl::DataLossError(absl::StrCat(manifest_path, ": ", init.status().message()));
    out.model.embedding_init = *init;
    if (m.contains("table_init")) {
      for (const json& e : m.at("table_init")) {
        absl::StatusOr<EmbeddingInitSpec> t = ParseEmbeddingInit(e.at(1).get<std::string>());
        if (!t.ok()) return absl::DataLossError(absl::StrCat(manifest_path, ": ", t.status().message()));
        out.model.table_init.emplace_back(e.at(0).get<std::string>(), *t);
      }
    }
    if (m.contains("graph")) {
      absl::StatusOr<graph::ModelGraph> g = graph::ParseModelGraph(
          m.at("graph").get<std::string>(), manifest_path + " (its model file)");
      if (!g.ok()) return absl::DataLossError(g.status().message());
      out.model.graph = std::make_shared<graph::ModelGraph>(*std::move(g));
    }
    out.schema.num_dense = out.model.num_dense;
    out.schema.num_sparse = out.model.num_sparse;
    out.schema.hash_buckets = m.at("hash_buckets").get<uint64_t>();
    if (out.model.num_sparse < 0 || out.model.num_sparse > (1 << 20)) {
      return absl::DataLossError(absl::StrCat(manifest_path, ": num_sparse = ",
                                              out.model.num_sparse, " is out of range"));
    }
    out.model.field_rows.assign(static_cast<size_t>(out.model.num_sparse), out.schema.hash_buckets);
    std::string sep = m.at("multi_hot_sep").get<std::string>();
    out.schema.multi_hot_sep = sep.empty() ? 0 : sep[0];
    std::string fsep = m.value("field_sep", std::string("\t"));
    out.schema.field_sep = fsep.empty() ? '\t' : fsep[0];
    out.schema.header = m.value("header", false);
    out.schema.max_line_bytes = m.value("max_line_bytes", out.schema.max_line_bytes);
    // A model saved before missing tokens existed read only empty fields as missing.
    out.schema.missing_tokens = m.contains("missing_values")
                                    ? m.at("missing_values").get<std::vector<std::string>>()
                                    : std::vector<std::string>();
    if (m.contains("schema")) {
      absl::StatusOr<Schema> schema = SchemaFromJson(m["schema"], manifest_path);
      if (!schema.ok()) return absl::DataLossError(schema.status().message());
      if (schema->num_dense != out.model.num_dense || schema->num_sparse != out.model.num_sparse) {
        return absl::DataLossError(absl::StrCat(manifest_path, ": the schema's columns do not "
                                                "match the model's fields"));
      }
      out.schema = *std::move(schema);
      SetSchemaColumns(out.schema, &out.model);
    }
    out.step = manifest.value("step", int64_t{0});
    if (manifest.contains("kept_best")) {
      const json& c = manifest.at("kept_best");
      out.chosen.metric = c.at("metric").get<std::string>();
      out.chosen.round = c.at("round").get<int>();
      out.chosen.step = c.at("step").get<int64_t>();
      out.chosen.eval_auc = c.at("eval_auc").get<double>();
      out.chosen.eval_logloss = c.at("eval_logloss").get<double>();
    }
    if (manifest.contains("export")) {
      const json& x = manifest.at("export");
      out.exported.seq = x.at("seq").get<uint64_t>();
      out.exported.delta = x.at("kind").get<std::string>() == "delta";
      out.exported.base = x.at("base").get<uint64_t>();
      out.exported.exported_unix_ms = x.value("exported_unix_ms", int64_t{0});
      if (out.exported.seq == 0 || out.exported.base > out.exported.seq ||
          out.exported.delta == (out.exported.base == out.exported.seq)) {
        return absl::DataLossError(absl::StrCat(manifest_path, ": inconsistent export entry"));
      }
    }
    for (const json& e : manifest.at("tables")) {
      TableValues t;
      t.spec.id = e.at("id").get<uint32_t>();
      t.spec.name = e.at("name").get<std::string>();
      t.spec.kind = e.at("kind").get<std::string>() == "sparse" ? TableKind::kSparse : TableKind::kDense;
      t.spec.size = e.at("size").get<uint64_t>();
      t.spec.dim = e.at("dim").get<uint32_t>();
      t.spec.init.kind = static_cast<InitKind>(e.value("init_kind", 0));
      t.spec.init.scale = e.value("init_scale", 0.0f);
      t.spec.init.seed = e.value("init_seed", uint64_t{0});
      t.missing_as_zeros = e.value("missing_rows", std::string("initializer")) == "zeros";
      std::string file = e.at("file").get<std::string>();
      if (!SafeFileName(file)) {
        return absl::DataLossError(absl::StrCat(manifest_path, ": bad table file name ", file));
      }
      PS_RETURN_IF_ERROR(ReadTable(dir + "/" + file, e, &t));
      if (e.contains("removed")) {
        const json& r = e.at("removed");
        std::string removed_file = r.at("file").get<std::string>();
        if (!SafeFileName(removed_file)) {
          return absl::DataLossError(
              absl::StrCat(manifest_path, ": bad removed-ids file name ", removed_file));
        }
        PS_RETURN_IF_ERROR(ReadRemoved(dir + "/" + removed_file, r, &t));
      }
      out.tables.push_back(std::move(t));
    }
    // A model saved before tables were named after their columns
    // ("emb.C1", not "emb.carrier"): its fields keep the old names.
    if (!out.model.field_names.empty()) {
      bool named = false;
      for (const TableValues& t : out.tables) {
        named = named || absl::EndsWith(t.spec.name, "." + SparseFieldName(out.model, 0));
      }
      if (!named) out.model.field_names.clear();
    }
  } catch (const json::exception& e) {
    return absl::DataLossError(absl::StrCat(manifest_path, ": ", e.what()));
  }
  return out;
}

}  // namespace pstrain::worker
