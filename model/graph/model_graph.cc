#include "model/graph/model_graph.h"

#include <algorithm>

#include <nlohmann/json.hpp>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/edit_distance.h"
#include "common/file_util.h"
#include "common/status.h"

namespace pstrain::worker::graph {
namespace {

using Json = nlohmann::ordered_json;

constexpr size_t kMaxModelFileBytes = 1 << 20;

constexpr int kMaxLayers = 1024;

struct TypeInfo {
  LayerType type;
  const char* name;
  std::vector<std::string> keys;  // beyond name, type, input(s)
  bool many_inputs;               // takes a list
};

const std::vector<TypeInfo>& Types() {
  static const auto* types = new std::vector<TypeInfo>{
      {LayerType::kMlp, "mlp", {"widths", "relu_last", "tower", "dropout", "init"}, true},
      {LayerType::kLinear, "linear", {"width"}, true},
      {LayerType::kConcat, "concat", {}, true},
      {LayerType::kDotInteraction, "dot_interaction", {}, true},
      {LayerType::kCross, "cross", {"layers", "rank"}, true},
      {LayerType::kFm, "fm", {}, true},
      {LayerType::kTargetAttention, "target_attention", {"sequence", "widths"}, true},
      {LayerType::kSelfAttention, "self_attention", {"sequence", "heads", "max_length", "feed_forward", "layer_norm"},
       true},
      {LayerType::kWide, "wide", {"columns", "bias"}, true},
      {LayerType::kAdd, "add", {}, true},
      {LayerType::kExperts, "experts", {"count", "widths"}, true},
      {LayerType::kGate, "gate", {"experts"}, true},
      {LayerType::kPool, "pool", {"sequence", "pooling"}, true},
  };
  return *types;
}

// One parse of a model file: walks the JSON in file order, finding each
// object's line by looking for it in the text after the previous one's.
class Parser {
 public:
  Parser(absl::string_view text, std::string name) : text_(text), name_(std::move(name)) {}

  absl::StatusOr<ModelGraph> Run();

 private:
  absl::Status Bad(size_t at, const std::string& what) const {
    return absl::InvalidArgumentError(absl::StrCat(name_, ":", LineAt(at), ": ", what));
  }
  int LineAt(size_t offset) const {
    return 1 + static_cast<int>(
                   std::count(text_.begin(), text_.begin() + std::min(offset, text_.size()), '\n'));
  }
  size_t Find(const std::string& s, size_t from) const {
    const size_t at = text_.find(s, from);
    return at == absl::string_view::npos ? from : at;
  }
  absl::Status Layer(const Json& j, size_t at, ModelGraph* g);
  absl::Status Head(const Json& j, size_t at, ModelGraph* g);
  absl::StatusOr<int> Int(const Json& v, const std::string& what, size_t at, int lo, int hi) const;
  absl::StatusOr<bool> Bool(const Json& v, const std::string& what, size_t at) const;
  // A non-empty list of strings ("must be a list of `kind`") appended to *out.
  absl::Status Names(const Json& v, const std::string& what, size_t at, const char* kind,
                     std::vector<std::string>* out) const;
  // An embedding initializer: "zeros", {"uniform": SCALE}, {"normal": SCALE},
  // {"uniform": "1/sqrt(dim)"} or {"uniform": "sqrt(1/rows)"}.
  absl::Status Init(const Json& v, const std::string& what, size_t at,
                    worker::EmbeddingInitSpec* init) const;

  absl::string_view text_;
  std::string name_;
};

absl::StatusOr<int> Parser::Int(const Json& v, const std::string& what, size_t at, int lo,
                                int hi) const {
  if (!v.is_number_integer()) return Bad(at, absl::StrCat(what, " must be a whole number"));
  const int64_t x = v.get<int64_t>();
  if (x < lo || x > hi) return Bad(at, absl::StrCat(what, " must be in ", lo, "..", hi, ", not ", x));
  return static_cast<int>(x);
}

absl::StatusOr<bool> Parser::Bool(const Json& v, const std::string& what, size_t at) const {
  if (!v.is_boolean()) return Bad(at, absl::StrCat(what, " must be true or false"));
  return v.get<bool>();
}

absl::Status Parser::Names(const Json& v, const std::string& what, size_t at, const char* kind,
                           std::vector<std::string>* out) const {
  const auto bad = [&] { return Bad(at, absl::StrCat(what, " must be a list of ", kind)); };
  if (!v.is_array() || v.empty()) return bad();
  for (const Json& x : v) {
    if (!x.is_string()) return bad();
    out->push_back(x.get<std::string>());
  }
  return absl::OkStatus();
}

absl::Status Parser::Init(const Json& v, const std::string& what, size_t at,
                          worker::EmbeddingInitSpec* init) const {
  const std::string usage = absl::StrCat(
      what, " is \"zeros\", {\"uniform\": SCALE}, {\"normal\": SCALE}, {\"uniform\": "
            "\"1/sqrt(dim)\"} or {\"uniform\": \"sqrt(1/rows)\"} (TorchRec's: rows = the "
            "column's hash_buckets), SCALE in (0, 100]");
  std::string text;
  if (v.is_string() && v.get<std::string>() == "zeros") {
    text = "zeros";
  } else if (v.is_object() && v.size() == 1 && (v.contains("uniform") || v.contains("normal"))) {
    const Json& s = v.begin().value();
    if (s.is_number()) {
      text = absl::StrCat(v.begin().key(), ":", s.get<double>());
    } else if (s.is_string()) {
      text = absl::StrCat(v.begin().key(), ":", s.get<std::string>());
    }
  }
  absl::StatusOr<worker::EmbeddingInitSpec> spec = worker::ParseEmbeddingInit(text);
  if (!spec.ok()) return Bad(at, usage);
  *init = *spec;
  return absl::OkStatus();
}

absl::StatusOr<ModelGraph> Parser::Run() {
  Json j = Json::parse(text_, nullptr, /*allow_exceptions=*/false, /*ignore_comments=*/true);
  if (j.is_discarded()) {
    try {
      (void)Json::parse(text_, nullptr, true, true);
    } catch (const Json::parse_error& e) {
      const std::string what = e.what();
      return Bad(e.byte > 0 ? e.byte - 1 : 0,
                 absl::StrCat("not valid JSON: ", what.substr(what.find(':') + 2)));
    }
    return Bad(0, "not valid JSON");
  }
  if (!j.is_object()) return Bad(0, "a model file is a JSON object: {\"layers\": [...], \"heads\": [...]}");
  ModelGraph g;
  g.file = name_;
  g.text = std::string(text_);
  const std::vector<std::string> top = {"name", "description", "embedding_dim", "embedding_init",
                                        "table_init", "layers", "heads"};
  size_t at = 0;
  for (auto& [key, value] : j.items()) {
    at = Find(absl::StrCat("\"", key, "\""), at);
    if (std::find(top.begin(), top.end(), key) == top.end()) {
      return Bad(at, absl::StrCat("unknown key \"", key, "\"", DidYouMeanQuoted(key, top), " (keys: ",
                                  absl::StrJoin(top, ", "), ")"));
    }
    if (key == "embedding_dim") {
      PS_ASSIGN_OR_RETURN(g.embedding_dim, Int(value, "\"embedding_dim\"", at, 1, kMaxGraphWidth));
    } else if (key == "embedding_init") {
      g.embedding_init.emplace();
      PS_RETURN_IF_ERROR(Init(value, "\"embedding_init\"", at, &*g.embedding_init));
    } else if (key == "table_init") {
      if (!value.is_object()) {
        return Bad(at, "\"table_init\" is an object of embedding tables' starts, e.g. "
                       "{\"emb.item\": {\"normal\": 0.01}}");
      }
      size_t entry_at = at;
      for (auto& [table, init] : value.items()) {
        entry_at = Find(absl::StrCat("\"", table, "\""), entry_at);
        ModelGraph::TableInit t;
        t.table = table;
        t.line = LineAt(entry_at);
        PS_RETURN_IF_ERROR(Init(init, absl::StrCat("\"table_init\": \"", table, "\""), entry_at, &t.init));
        g.table_init.push_back(std::move(t));
      }
    } else if (key == "layers" || key == "heads") {
      if (!value.is_array()) return Bad(at, absl::StrCat("\"", key, "\" must be a list of objects"));
      size_t item_at = at;
      for (const Json& item : value) {
        item_at = Find("{", item_at + 1);
        if (key == "layers") {
          PS_RETURN_IF_ERROR(Layer(item, item_at, &g));
        } else {
          PS_RETURN_IF_ERROR(Head(item, item_at, &g));
        }
      }
    } else if (!value.is_string()) {
      return Bad(at, absl::StrCat("\"", key, "\" must be a string"));
    } else if (key == "name") {
      g.name = value.get<std::string>();
    }
  }
  if (g.layers.empty()) return Bad(0, "no \"layers\": a model has at least one layer");
  if (g.heads.empty()) {
    return Bad(0, "no \"heads\": name the layer that gives the logit, e.g. "
                  "\"heads\": [{\"name\": \"click\", \"input\": \"top\"}]");
  }
  for (size_t a = 0; a < g.heads.size(); ++a) {
    for (size_t b = 0; b < a; ++b) {
      if (g.heads[a].name == g.heads[b].name) {
        return absl::InvalidArgumentError(absl::StrCat(name_, ":", g.heads[a].line, ": two heads named \"",
                                                       g.heads[a].name, "\""));
      }
    }
  }
  for (size_t a = 0; a < g.heads.size(); ++a) {
    const HeadSpec& h = g.heads[a];
    if (h.times.empty()) continue;
    const std::string at = absl::StrCat(name_, ":", h.line, ": head \"", h.name, "\": \"times\": ");
    size_t b = 0;
    while (b < a && g.heads[b].name != h.times) ++b;
    if (b == a) {
      std::vector<std::string> earlier;
      for (size_t e = 0; e < a; ++e) earlier.push_back(g.heads[e].name);
      return absl::InvalidArgumentError(absl::StrCat(
          at, "no earlier head \"", h.times, "\"", DidYouMeanQuoted(h.times, earlier),
          " (it names a head listed before this one, e.g. the click head a conversion head "
          "is conditioned on)"));
    }
    if (h.regression || g.heads[b].regression) {
      return absl::InvalidArgumentError(absl::StrCat(
          at, "a conditioned head and the head it names are probability heads (\"loss\": \"bce\")"));
    }
    if (!g.heads[b].times.empty()) {
      return absl::InvalidArgumentError(absl::StrCat(at, "\"", h.times, "\" is itself conditioned on \"",
                                                     g.heads[b].times, "\" (one level only)"));
    }
  }
  return g;
}

absl::Status Parser::Layer(const Json& j, size_t at, ModelGraph* g) {
  const std::string where = absl::StrCat("layers[", g->layers.size(), "]");
  if (!j.is_object()) return Bad(at, absl::StrCat(where, " must be an object"));
  if (g->layers.size() >= kMaxLayers) return Bad(at, absl::StrCat("more than ", kMaxLayers, " layers"));
  LayerSpec l;
  l.line = LineAt(at);
  if (!j.contains("name") || !j["name"].is_string() || j["name"].get<std::string>().empty()) {
    return Bad(at, absl::StrCat(where, " needs a \"name\" (a string)"));
  }
  l.name = j["name"].get<std::string>();
  const std::string layer = absl::StrCat("layer \"", l.name, "\"");
  for (const LayerSpec& other : g->layers) {
    if (other.name == l.name) {
      return Bad(at, absl::StrCat(layer, ": the name is taken by the layer at line ", other.line));
    }
  }
  std::vector<std::string> type_names;
  for (const TypeInfo& t : Types()) type_names.emplace_back(t.name);
  if (!j.contains("type") || !j["type"].is_string()) {
    return Bad(at, absl::StrCat(layer, " needs a \"type\": one of ", absl::StrJoin(type_names, ", ")));
  }
  const std::string type = j["type"].get<std::string>();
  const TypeInfo* info = nullptr;
  for (const TypeInfo& t : Types()) {
    if (type == t.name) info = &t;
  }
  if (info == nullptr) {
    return Bad(at, absl::StrCat(layer, ": unknown type \"", type, "\"", DidYouMeanQuoted(type, type_names),
                                " (types: ", absl::StrJoin(type_names, ", "), ")"));
  }
  l.type = info->type;
  std::vector<std::string> keys = {"name", "type", "input", "inputs"};
  keys.insert(keys.end(), info->keys.begin(), info->keys.end());
  size_t key_at = at;
  for (auto& [key, value] : j.items()) {
    key_at = Find(absl::StrCat("\"", key, "\""), key_at);
    const std::string what = absl::StrCat(layer, ": \"", key, "\"");
    if (std::find(keys.begin(), keys.end(), key) == keys.end()) {
      return Bad(key_at, absl::StrCat(layer, " (", type, "): unknown key \"", key, "\"",
                                      DidYouMeanQuoted(key, keys), " (keys: ", absl::StrJoin(keys, ", "), ")"));
    }
    if (key == "input") {
      if (!value.is_string()) return Bad(key_at, absl::StrCat(what, " must be a name"));
      l.inputs.push_back(value.get<std::string>());
    } else if (key == "inputs") {
      PS_RETURN_IF_ERROR(Names(value, what, key_at, "names", &l.inputs));
    } else if (key == "widths") {
      if (!value.is_array() || value.empty()) {
        return Bad(key_at, absl::StrCat(what, " must be a list of widths, e.g. [64, 32]"));
      }
      for (const Json& v : value) {
        PS_ASSIGN_OR_RETURN(int w, Int(v, what, key_at, 1, kMaxGraphWidth));
        l.widths.push_back(w);
      }
    } else if (key == "relu_last") {
      PS_ASSIGN_OR_RETURN(l.relu_last, Bool(value, what, key_at));
    } else if (key == "layer_norm") {
      PS_ASSIGN_OR_RETURN(l.layer_norm, Bool(value, what, key_at));
    } else if (key == "feed_forward") {
      PS_ASSIGN_OR_RETURN(l.feed_forward, Int(value, what, key_at, 1, kMaxGraphWidth));
    } else if (key == "init") {
      if (!value.is_string() || (value.get<std::string>() != "he" && value.get<std::string>() != "linear")) {
        return Bad(key_at, absl::StrCat(what, " is \"linear\" (nn.Linear's U(+-1/sqrt(fan_in)), the "
                                              "default) or \"he\" (U(+-sqrt(6/fan_in)) for the "
                                              "hidden layers)"));
      }
      l.he_init = value.get<std::string>() == "he";
    } else if (key == "tower") {
      PS_ASSIGN_OR_RETURN(l.tower, Bool(value, what, key_at));
    } else if (key == "dropout") {
      if (!value.is_number() || !(value.get<double>() >= 0 && value.get<double>() < 1)) {
        return Bad(key_at, absl::StrCat(what, " must be a rate in [0, 1)"));
      }
      l.dropout = value.get<float>();
    } else if (key == "width") {
      PS_ASSIGN_OR_RETURN(l.width, Int(value, what, key_at, 1, kMaxGraphWidth));
    } else if (key == "layers") {
      PS_ASSIGN_OR_RETURN(l.layers, Int(value, what, key_at, 1, 64));
    } else if (key == "rank") {
      PS_ASSIGN_OR_RETURN(l.rank, Int(value, what, key_at, 0, kMaxGraphWidth));
    } else if (key == "columns") {
      PS_RETURN_IF_ERROR(Names(value, what, key_at, "column names", &l.columns));
    } else if (key == "bias") {
      PS_ASSIGN_OR_RETURN(l.bias, Bool(value, what, key_at));
    } else if (key == "heads") {
      PS_ASSIGN_OR_RETURN(l.heads, Int(value, what, key_at, 1, 64));
    } else if (key == "pooling") {
      if (!value.is_string() || (value.get<std::string>() != "sum" && value.get<std::string>() != "mean")) {
        return Bad(key_at, absl::StrCat(what, " is \"sum\" or \"mean\""));
      }
      l.mean_pool = value.get<std::string>() == "mean";
    } else if (key == "count") {
      PS_ASSIGN_OR_RETURN(l.count, Int(value, what, key_at, 1, 64));
    } else if (key == "experts") {
      PS_RETURN_IF_ERROR(Names(value, what, key_at, "experts layers' names", &l.experts));
    } else if (key == "max_length") {
      PS_ASSIGN_OR_RETURN(l.max_length, Int(value, what, key_at, 1, 100000));
    } else if (key == "sequence") {
      if (!value.is_string()) return Bad(key_at, absl::StrCat(what, " must be a column's name"));
      l.sequence = value.get<std::string>();
    }
  }
  if (j.contains("input") && j.contains("inputs")) {
    return Bad(at, absl::StrCat(layer, ": give \"input\" or \"inputs\", not both"));
  }
  if (l.type == LayerType::kSelfAttention || l.type == LayerType::kPool) {
    if (l.type == LayerType::kPool && !l.inputs.empty()) {
      return Bad(at, absl::StrCat(layer, " (", type, ") reads its \"sequence\" only; it takes "
                                         "no \"input\""));
    }
    if (l.inputs.size() > 1) {
      return Bad(at, absl::StrCat(layer, " (", type, ") takes one \"input\" at most: the target "
                                         "(e.g. the candidate item's embedding) appended to each "
                                         "row's sequence; it has ", l.inputs.size()));
    }
    if (l.sequence.empty()) {
      return Bad(at, absl::StrCat(layer, " (", type, ") needs a \"sequence\": the column "
                                         "of the items, e.g. a history of clicked items"));
    }
  } else if (l.inputs.empty() && l.type != LayerType::kWide) {
    return Bad(at, absl::StrCat(layer, " needs an \"input\" (or \"inputs\")"));
  }
  if (l.type == LayerType::kExperts && (l.count == 0 || l.widths.empty())) {
    return Bad(at, absl::StrCat(layer, " (experts) needs a \"count\" and \"widths\" (each "
                                       "expert's MLP), e.g. \"count\": 4, \"widths\": [64, 32]"));
  }
  if (l.type == LayerType::kGate && l.experts.empty()) {
    return Bad(at, absl::StrCat(layer, " (gate) needs \"experts\": the experts layers it mixes, "
                                       "e.g. [\"shared_experts\"]"));
  }
  if (l.type == LayerType::kMlp && l.widths.empty()) {
    return Bad(at, absl::StrCat(layer, " (mlp) needs \"widths\", e.g. [64, 32]"));
  }
  if (l.type == LayerType::kTargetAttention) {
    if (l.sequence.empty()) {
      return Bad(at, absl::StrCat(layer, " (target_attention) needs a \"sequence\": the column "
                                         "of the items, e.g. a history of clicked items"));
    }
    if (l.widths.empty()) l.widths = {36};  // DIN's attention unit
  }
  g->layers.push_back(std::move(l));
  return absl::OkStatus();
}

absl::Status Parser::Head(const Json& j, size_t at, ModelGraph* g) {
  const std::string where = absl::StrCat("heads[", g->heads.size(), "]");
  if (!j.is_object()) return Bad(at, absl::StrCat(where, " must be an object"));
  HeadSpec h;
  h.line = LineAt(at);
  const std::vector<std::string> keys = {"name", "input", "label", "loss", "weight", "times"};
  size_t key_at = at;
  for (auto& [key, value] : j.items()) {
    key_at = Find(absl::StrCat("\"", key, "\""), key_at);
    if (std::find(keys.begin(), keys.end(), key) == keys.end()) {
      return Bad(key_at, absl::StrCat(where, ": unknown key \"", key, "\"", DidYouMeanQuoted(key, keys),
                                      " (keys: ", absl::StrJoin(keys, ", "), ")"));
    }
    if (key == "weight") {
      if (!value.is_number() || !(value.get<double>() > 0 && value.get<double>() <= 1000)) {
        return Bad(key_at, absl::StrCat(where, ": \"weight\" must be a number in (0, 1000]"));
      }
      h.weight = value.get<float>();
      continue;
    }
    if (!value.is_string()) return Bad(key_at, absl::StrCat(where, ": \"", key, "\" must be a string"));
    const std::string v = value.get<std::string>();
    if (key == "loss") {
      if (v != "bce" && v != "mse") {
        return Bad(key_at, absl::StrCat(where, ": \"loss\" is \"bce\" (binary cross-entropy of a "
                                               "probability, the default) or \"mse\" (squared error "
                                               "of a value)"));
      }
      h.regression = v == "mse";
    } else if (key == "times") {
      h.times = v;
    } else {
      (key == "name" ? h.name : key == "input" ? h.input : h.label) = v;
    }
  }
  if (h.input.empty()) return Bad(at, absl::StrCat(where, " needs an \"input\": the layer giving its logit"));
  if (h.name.empty()) h.name = g->heads.empty() ? "click" : absl::StrCat("head", g->heads.size());
  g->heads.push_back(std::move(h));
  return absl::OkStatus();
}

}  // namespace

absl::string_view LayerTypeName(LayerType t) {
  for (const TypeInfo& i : Types()) {
    if (i.type == t) return i.name;
  }
  return "?";
}

absl::StatusOr<ModelGraph> ParseModelGraph(absl::string_view text, const std::string& name) {
  if (text.size() > kMaxModelFileBytes) {
    return absl::InvalidArgumentError(absl::StrCat(name, ": larger than ", kMaxModelFileBytes,
                                                   " bytes: not a model file"));
  }
  return Parser(text, name).Run();
}

absl::StatusOr<ModelGraph> ReadModelGraph(const std::string& path) {
  absl::StatusOr<std::string> text = ReadFileToString(path);
  if (!text.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("model file ", path, ": ", text.status().message()));
  }
  return ParseModelGraph(*text, path);
}

}  // namespace pstrain::worker::graph
