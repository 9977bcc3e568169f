#include "job/job_spec.h"

#include <algorithm>
#include <fstream>
#include <map>
#include <sstream>

#include <nlohmann/json.hpp>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "common/edit_distance.h"
#include "common/status.h"

namespace pstrain::job {
namespace {

using Json = nlohmann::ordered_json;

constexpr size_t kMaxJobFileBytes = 1 << 20;

// One parse of a job's text: walks the JSON in file order, finding each
// key's line by looking for it in the text after its parent's.
class Reader {
 public:
  Reader(absl::string_view text, std::string name, Source source)
      : text_(text), name_(std::move(name)), source_(source) {}

  absl::Status Read(JobSpec* spec);

 private:
  absl::Status Bad(size_t at, const std::string& what) const {
    return absl::InvalidArgumentError(absl::StrCat(name_, ":", LineAt(at), ": ", what));
  }
  size_t LineAt(size_t offset) const {
    return 1 + std::count(text_.begin(), text_.begin() + std::min(offset, text_.size()), '\n');
  }
  // The offset of "key" in the text at or after `from` (`from` when absent).
  size_t Find(const std::string& key, size_t from) const {
    const size_t at = text_.find(absl::StrCat("\"", key, "\""), from);
    return at == absl::string_view::npos ? from : at;
  }
  std::string Where(size_t at) const { return absl::StrCat(name_, ":", LineAt(at)); }

  absl::Status Section(const std::string& section, const Json& v, size_t at);
  absl::Status Object(const std::string& prefix, const Json& v, size_t at);
  absl::Status Tables(const Json& v, size_t at);
  absl::Status Value(const std::string& path, const Json& v, size_t at);
  absl::Status Unknown(const std::string& path, size_t at) const;

  absl::string_view text_;
  std::string name_;
  Source source_;
  JobSpec* spec_ = nullptr;
  // Tables' own settings by the flag that takes them ("table_weight_decay",
  // "table_init"): "NAME=VALUE" items and where the last was.
  struct PerTable {
    std::vector<std::string> items;
    size_t at = 0;
  };
  std::map<std::string, PerTable> per_table_;
};

absl::Status Reader::Read(JobSpec* spec) {
  spec_ = spec;
  Json j = Json::parse(text_, nullptr, /*allow_exceptions=*/false, /*ignore_comments=*/true);
  if (j.is_discarded()) {
    try {
      (void)Json::parse(text_, nullptr, true, true);
    } catch (const Json::parse_error& e) {
      // e.byte is 1-based, at the character that broke the parse.
      return Bad(e.byte > 0 ? e.byte - 1 : 0,
                 absl::StrCat("not valid JSON: ", std::string(e.what()).substr(
                                                      std::string(e.what()).find(':') + 2)));
    }
    return Bad(0, "not valid JSON");
  }
  if (!j.is_object()) return Bad(0, "a job file is a JSON object of sections");
  size_t at = 0;
  for (auto& [key, value] : j.items()) {
    at = Find(key, at);
    if (key == "name" || key == "description") {
      if (!value.is_string()) return Bad(at, absl::StrCat("\"", key, "\" must be a string"));
      if (key == "name") spec->set_name(value.get<std::string>());
      if (key == "description") spec->set_description(value.get<std::string>());
      continue;
    }
    PS_RETURN_IF_ERROR(Section(key, value, at));
  }
  for (const auto& [flag, t] : per_table_) {
    spec->Set(*FieldOfFlag(flag), absl::StrJoin(t.items, ","), source_, Where(t.at));
  }
  return absl::OkStatus();
}

absl::Status Reader::Section(const std::string& section, const Json& v, size_t at) {
  const auto& sections = JobSections();
  if (std::find(sections.begin(), sections.end(), section) == sections.end()) {
    if (const JobField* f = FieldOfFlag(section); f != nullptr) {
      return Bad(at, absl::StrCat("\"", section, "\" is not a section; the field of --", section,
                                  " is ", f->path));
    }
    if (absl::string_view why = NodeSettingReason(section); !why.empty()) {
      return Bad(at, absl::StrCat("\"", section, "\" is not part of a job: ", why));
    }
    return Bad(at, absl::StrCat("unknown section \"", section, "\" (sections: ",
                                absl::StrJoin(sections, ", "), ")"));
  }
  if (section == "tables") return Tables(v, at);
  if (!v.is_object()) return Bad(at, absl::StrCat("\"", section, "\" must be an object"));
  return Object(section, v, at);
}

absl::Status Reader::Object(const std::string& prefix, const Json& v, size_t at) {
  size_t key_at = at;
  for (auto& [key, value] : v.items()) {
    key_at = Find(key, key_at);
    const std::string path = absl::StrCat(prefix, ".", key);
    if (value.is_object() && path != "model.graph") {
      PS_RETURN_IF_ERROR(Object(path, value, key_at));
      continue;
    }
    PS_RETURN_IF_ERROR(Value(path, value, key_at));
  }
  return absl::OkStatus();
}

absl::Status Reader::Tables(const Json& v, size_t at) {
  if (!v.is_array()) {
    return Bad(at, "\"tables\" must be a list of entries, e.g. [{\"name\": \"*\", \"dim\": 16}]");
  }
  size_t entry_at = at;
  for (size_t i = 0; i < v.size(); ++i) {
    const Json& e = v[i];
    entry_at = text_.find('{', entry_at + 1);
    if (entry_at == absl::string_view::npos) entry_at = at;
    if (!e.is_object()) return Bad(entry_at, absl::StrCat("tables[", i, "] must be an object"));
    std::string name = "*";
    if (e.contains("name")) {
      if (!e["name"].is_string()) return Bad(entry_at, absl::StrCat("tables[", i, "].name must be a string"));
      name = e["name"].get<std::string>();
    }
    if (name == "*" || name == "dense") {
      Json rest = e;
      rest.erase("name");
      PS_RETURN_IF_ERROR(Object(absl::StrCat("tables.", name), rest, entry_at));
      continue;
    }
    // A table of its own (or a prefix ending in *): its weight decay and
    // its initializer can differ from the others'.
    size_t key_at = entry_at;
    for (auto& [key, value] : e.items()) {
      key_at = Find(key, key_at);
      if (key == "name") continue;
      if (key != "weight_decay" && key != "init") {
        return Bad(key_at,
                   absl::StrCat("tables[", i, "] (\"", name, "\"): a table's own \"", key,
                                "\" is not supported; only \"weight_decay\" and \"init\" can "
                                "differ by table (the \"*\" entry sets the rest for every "
                                "embedding table, \"dense\" for the MLP tables)"));
      }
      std::string text;
      if (key == "weight_decay") {
        double number = 0;
        text = value.is_string() ? value.get<std::string>() : value.dump();
        if (!(value.is_number() || value.is_string()) || !absl::SimpleAtod(text, &number)) {
          return Bad(key_at, absl::StrCat("tables[", i, "].weight_decay must be a number"));
        }
      } else {
        if (!value.is_string()) {
          return Bad(key_at, absl::StrCat("tables[", i, "].init must be a string, e.g. "
                                          "\"normal:0.01\" (--embedding_init's forms)"));
        }
        text = value.get<std::string>();
      }
      PerTable& t = per_table_[key == "init" ? "table_init" : "table_weight_decay"];
      t.items.push_back(absl::StrCat(name, "=", text));
      t.at = key_at;
    }
  }
  return absl::OkStatus();
}

absl::Status Reader::Value(const std::string& path, const Json& v, size_t at) {
  const JobField* f = FieldAtPath(path);
  if (f == nullptr) return Unknown(path, at);
  std::string text;
  if (v.is_string()) {
    text = v.get<std::string>();
  } else if (v.is_boolean()) {
    text = v.get<bool>() ? "true" : "false";
  } else if (v.is_number()) {
    text = v.dump();
  } else if (v.is_object()) {
    // Only model.graph holds an object: a model file's network, inline.
    text = v.dump();
  } else if (v.is_array()) {
    std::vector<std::string> parts;
    for (const Json& e : v) {
      if (e.is_string()) {
        parts.push_back(e.get<std::string>());
      } else if (e.is_number()) {
        parts.push_back(e.dump());
      } else {
        return Bad(at, absl::StrCat(path, ": a list of numbers or strings"));
      }
    }
    text = absl::StrJoin(parts, ",");
  } else {
    return Bad(at, absl::StrCat(path, ": null is not a value (leave the field out for its default)"));
  }
  spec_->Set(*f, std::move(text), source_, Where(at));
  return absl::OkStatus();
}

absl::Status Reader::Unknown(const std::string& path, size_t at) const {
  const std::string key = path.substr(path.rfind('.') + 1);
  if (const JobField* f = FieldOfFlag(key); f != nullptr) {
    return Bad(at, absl::StrCat("no field ", path, "; the field of --", key, " is ", f->path));
  }
  if (absl::string_view why = NodeSettingReason(key); !why.empty()) {
    return Bad(at, absl::StrCat(path, " is not part of a job: ", why));
  }
  const JobField* best = nullptr;
  size_t best_distance = 0;
  for (const JobField& f : JobFields()) {
    const size_t d = EditDistance(path, f.path);
    if (best == nullptr || d < best_distance) {
      best = &f;
      best_distance = d;
    }
  }
  std::string hint;
  if (best != nullptr && best_distance <= std::max<size_t>(2, path.size() / 4)) {
    hint = absl::StrCat(" (did you mean ", best->path, "?)");
  } else {
    std::vector<std::string> same;
    const std::string prefix = path.substr(0, path.rfind('.') + 1);
    for (const JobField& f : JobFields()) {
      if (absl::StartsWith(f.path, prefix)) same.emplace_back(f.path.substr(prefix.size()));
    }
    if (!same.empty()) hint = absl::StrCat(" (", prefix, "* are: ", absl::StrJoin(same, ", "), ")");
  }
  return Bad(at, absl::StrCat("unknown field ", path, hint));
}

}  // namespace

absl::string_view SourceName(Source s) {
  switch (s) {
    case Source::kDefault: return "default";
    case Source::kCoordinator: return "coordinator";
    case Source::kFile: return "file";
    case Source::kEnvironment: return "environment";
    case Source::kFlag: return "flag";
  }
  return "?";
}

absl::StatusOr<JobSpec> JobSpec::ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat("job file ", path, ": cannot open it"));
  std::string text;
  text.resize(kMaxJobFileBytes + 1);
  in.read(text.data(), static_cast<std::streamsize>(text.size()));
  text.resize(static_cast<size_t>(in.gcount()));
  if (text.size() > kMaxJobFileBytes) {
    return absl::InvalidArgumentError(
        absl::StrCat("job file ", path, ": larger than ", kMaxJobFileBytes, " bytes"));
  }
  absl::StatusOr<JobSpec> spec = Parse(text, path, Source::kFile);
  if (spec.ok()) spec->file_ = path;
  return spec;
}

absl::StatusOr<JobSpec> JobSpec::Parse(absl::string_view text, const std::string& name,
                                       Source source) {
  JobSpec spec;
  Reader reader(text, name, source);
  PS_RETURN_IF_ERROR(reader.Read(&spec));
  return spec;
}

void JobSpec::Set(const JobField& field, std::string value, Source source, std::string where) {
  const auto& fields = JobFields();
  auto index = [&](const JobField* f) { return f - fields.data(); };
  auto it = std::lower_bound(values_.begin(), values_.end(), &field,
                             [&](const JobValue& v, const JobField* f) { return index(v.field) < index(f); });
  if (it != values_.end() && it->field == &field) {
    *it = JobValue{&field, std::move(value), source, std::move(where)};
    return;
  }
  values_.insert(it, JobValue{&field, std::move(value), source, std::move(where)});
}

const JobValue* JobSpec::Find(absl::string_view flag) const {
  for (const JobValue& v : values_) {
    if (v.field->flag == flag) return &v;
  }
  return nullptr;
}

std::vector<std::string> JobSpec::FlagArgs(uint8_t roles) const {
  std::vector<std::string> out;
  for (const JobValue& v : values_) {
    if ((v.field->roles & roles) != 0) out.push_back(absl::StrCat("--", v.field->flag, "=", v.value));
  }
  return out;
}

std::string JobSpec::ToJson() const {
  Json j = Json::object();
  if (!name_.empty()) j["name"] = name_;
  if (!description_.empty()) j["description"] = description_;
  std::map<std::string, Json> tables;  // entry name -> entry
  std::vector<std::string> table_order;
  auto entry = [&](const std::string& table) -> Json& {
    if (!tables.count(table)) {
      tables[table] = Json{{"name", table}};
      table_order.push_back(table);
    }
    return tables[table];
  };
  for (const JobValue& v : values_) {
    std::vector<std::string> parts = absl::StrSplit(v.field->path, '.');
    if (parts[0] == "tables") {
      if (v.field->flag == "table_weight_decay" || v.field->flag == "table_init") {
        for (absl::string_view item : absl::StrSplit(v.value, ',', absl::SkipEmpty())) {
          const size_t eq = item.find('=');
          if (eq == absl::string_view::npos) continue;
          Json& e = entry(std::string(item.substr(0, eq)));
          e[v.field->flag == "table_init" ? "init" : "weight_decay"] = std::string(item.substr(eq + 1));
        }
        continue;
      }
      Json* at = &entry(parts[1]);
      for (size_t i = 2; i + 1 < parts.size(); ++i) at = &(*at)[parts[i]];
      (*at)[parts.back()] = v.value;
      continue;
    }
    Json* at = &j;
    for (size_t i = 0; i + 1 < parts.size(); ++i) at = &(*at)[parts[i]];
    if (v.field->flag == "model_graph") {
      // The network inline, as an object (as a job file writes it).
      Json graph = Json::parse(v.value, nullptr, /*allow_exceptions=*/false, /*ignore_comments=*/true);
      if (graph.is_object()) {
        (*at)[parts.back()] = std::move(graph);
        continue;
      }
    }
    (*at)[parts.back()] = v.value;
  }
  if (!table_order.empty()) {
    Json list = Json::array();
    for (const std::string& t : table_order) list.push_back(tables[t]);
    j["tables"] = list;
  }
  return j.dump(2);
}

}  // namespace pstrain::job
