#include "model/graph/model_graph.h"

#include <algorithm>
#include <map>
#include <set>

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
constexpr int kMaxWidth = 1 << 16;
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
      {LayerType::kSelfAttention, "self_attention", {"sequence", "heads", "max_length"}, true},
      {LayerType::kWide, "wide", {"columns", "bias"}, true},
      {LayerType::kAdd, "add", {}, true},
  };
  return *types;
}

// The closest of `names` to `key` when it looks like a typo of it.
std::string Closest(const std::string& key, const std::vector<std::string>& names) {
  std::string best;
  size_t best_d = std::max<size_t>(2, key.size() / 3) + 1;
  for (const std::string& n : names) {
    const size_t d = EditDistance(key, n);
    if (d < best_d) {
      best_d = d;
      best = n;
    }
  }
  return best.empty() ? "" : absl::StrCat(" (did you mean \"", best, "\"?)");
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
                                        "layers", "heads"};
  size_t at = 0;
  for (auto& [key, value] : j.items()) {
    at = Find(absl::StrCat("\"", key, "\""), at);
    if (std::find(top.begin(), top.end(), key) == top.end()) {
      return Bad(at, absl::StrCat("unknown key \"", key, "\"", Closest(key, top), " (keys: ",
                                  absl::StrJoin(top, ", "), ")"));
    }
    if (key == "embedding_dim") {
      PS_ASSIGN_OR_RETURN(g.embedding_dim, Int(value, "\"embedding_dim\"", at, 1, kMaxWidth));
    } else if (key == "embedding_init") {
      // "zeros", {"uniform": SCALE} or {"normal": SCALE}.
      const std::string usage =
          "\"embedding_init\" is \"zeros\", {\"uniform\": SCALE} or {\"normal\": SCALE}";
      if (value.is_string() && value.get<std::string>() == "zeros") {
        g.embedding_init = "zeros";
      } else if (value.is_object() && value.size() == 1 &&
                 (value.contains("uniform") || value.contains("normal"))) {
        g.embedding_init = value.begin().key();
        const Json& s = value.begin().value();
        if (!s.is_number() || !(s.get<double>() > 0 && s.get<double>() <= 100)) {
          return Bad(at, absl::StrCat(usage, ", SCALE in (0, 100]"));
        }
        g.embedding_init_scale = s.get<float>();
      } else {
        return Bad(at, usage);
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
  if (g.heads.size() > 1) {
    return absl::InvalidArgumentError(absl::StrCat(
               name_, ":", g.heads[1].line, ": ", g.heads.size(), " heads: this build trains one head per model "
                                            "(multi-task heads are not built yet)"));
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
    return Bad(at, absl::StrCat(layer, ": unknown type \"", type, "\"", Closest(type, type_names),
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
                                      Closest(key, keys), " (keys: ", absl::StrJoin(keys, ", "), ")"));
    }
    if (key == "input") {
      if (!value.is_string()) return Bad(key_at, absl::StrCat(what, " must be a name"));
      l.inputs.push_back(value.get<std::string>());
    } else if (key == "inputs") {
      if (!value.is_array() || value.empty()) {
        return Bad(key_at, absl::StrCat(what, " must be a list of names"));
      }
      for (const Json& v : value) {
        if (!v.is_string()) return Bad(key_at, absl::StrCat(what, " must be a list of names"));
        l.inputs.push_back(v.get<std::string>());
      }
    } else if (key == "widths") {
      if (!value.is_array() || value.empty()) {
        return Bad(key_at, absl::StrCat(what, " must be a list of widths, e.g. [64, 32]"));
      }
      for (const Json& v : value) {
        PS_ASSIGN_OR_RETURN(int w, Int(v, what, key_at, 1, kMaxWidth));
        l.widths.push_back(w);
      }
    } else if (key == "relu_last") {
      PS_ASSIGN_OR_RETURN(l.relu_last, Bool(value, what, key_at));
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
      PS_ASSIGN_OR_RETURN(l.width, Int(value, what, key_at, 1, kMaxWidth));
    } else if (key == "layers") {
      PS_ASSIGN_OR_RETURN(l.layers, Int(value, what, key_at, 1, 64));
    } else if (key == "rank") {
      PS_ASSIGN_OR_RETURN(l.rank, Int(value, what, key_at, 0, kMaxWidth));
    } else if (key == "columns") {
      if (!value.is_array() || value.empty()) {
        return Bad(key_at, absl::StrCat(what, " must be a list of column names"));
      }
      for (const Json& v : value) {
        if (!v.is_string()) return Bad(key_at, absl::StrCat(what, " must be a list of column names"));
        l.columns.push_back(v.get<std::string>());
      }
    } else if (key == "bias") {
      PS_ASSIGN_OR_RETURN(l.bias, Bool(value, what, key_at));
    } else if (key == "heads") {
      PS_ASSIGN_OR_RETURN(l.heads, Int(value, what, key_at, 1, 64));
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
  if (l.type == LayerType::kSelfAttention) {
    if (!l.inputs.empty()) {
      return Bad(at, absl::StrCat(layer, " (self_attention) reads its \"sequence\" only; it takes "
                                         "no \"input\""));
    }
    if (l.sequence.empty()) {
      return Bad(at, absl::StrCat(layer, " (self_attention) needs a \"sequence\": the column "
                                         "of the items, e.g. a history of clicked items"));
    }
  } else if (l.inputs.empty() && l.type != LayerType::kWide) {
    return Bad(at, absl::StrCat(layer, " needs an \"input\" (or \"inputs\")"));
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
  const std::vector<std::string> keys = {"name", "input"};
  size_t key_at = at;
  for (auto& [key, value] : j.items()) {
    key_at = Find(absl::StrCat("\"", key, "\""), key_at);
    if (std::find(keys.begin(), keys.end(), key) == keys.end()) {
      return Bad(key_at, absl::StrCat(where, ": unknown key \"", key, "\"", Closest(key, keys),
                                      " (keys: name, input; a head's logit trains against the "
                                      "schema's label with binary cross-entropy)"));
    }
    if (!value.is_string()) return Bad(key_at, absl::StrCat(where, ": \"", key, "\" must be a string"));
    (key == "name" ? h.name : h.input) = value.get<std::string>();
  }
  if (h.input.empty()) return Bad(at, absl::StrCat(where, " needs an \"input\": the layer giving its logit"));
  if (h.name.empty()) h.name = "click";
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

int ResolvedGraph::InputWidth(int layer) const {
  int w = 0;
  for (int t : layer_inputs[layer]) w += tensors[t].width;
  return w;
}

absl::StatusOr<ResolvedGraph> ResolveGraph(const ModelGraph& g, const GraphInputs& in) {
  ResolvedGraph r;
  std::map<std::string, int> by_name;
  const auto bad = [&g](int line, const std::string& what) {
    return absl::InvalidArgumentError(absl::StrCat(g.file, ":", line, ": ", what));
  };
  if (in.num_dense > 0) {
    Tensor t;
    t.name = "dense";
    t.kind = Tensor::Kind::kDense;
    t.width = in.num_dense;
    by_name[t.name] = static_cast<int>(r.tensors.size());
    r.tensors.push_back(t);
  }
  for (size_t f = 0; f < in.columns.size(); ++f) {
    Tensor t;
    t.name = in.columns[f];
    t.kind = Tensor::Kind::kEmbedding;
    t.width = in.dims[f];
    t.field = static_cast<int>(f);
    by_name[t.name] = static_cast<int>(r.tensors.size());
    r.tensors.push_back(t);
  }
  for (size_t i = 0; i < g.layers.size(); ++i) {
    const LayerSpec& l = g.layers[i];
    if (l.name == "dense" || l.name == "embeddings" || by_name.count(l.name)) {
      return bad(l.line, absl::StrCat("layer \"", l.name, "\": the name is taken by ",
                                      l.name == "embeddings" ? "every categorical column's embedding"
                                                             : "an input of the schema"));
    }
    Tensor t;
    t.name = l.name;
    t.layer = static_cast<int>(i);
    by_name[t.name] = static_cast<int>(r.tensors.size());
    r.layer_output.push_back(static_cast<int>(r.tensors.size()));
    r.tensors.push_back(t);
  }
  // Columns sharing ids share a table: of one width.
  for (size_t f = 0; f < in.ids_of.size() && f < in.columns.size(); ++f) {
    const int o = in.ids_of[f];
    if (o >= 0 && in.dims[f] != in.dims[o]) {
      return bad(1, absl::StrCat("column \"", in.columns[f], "\" takes its ids from \"",
                                 in.columns[o], "\" (ids_like) and shares its table, but is ",
                                 in.dims[f], " wide and \"", in.columns[o], "\" ", in.dims[o]));
    }
  }
  // Inputs by name.
  std::vector<std::string> known;
  for (const auto& [name, id] : by_name) known.push_back(name);
  known.emplace_back("embeddings");
  r.layer_inputs.resize(g.layers.size());
  for (size_t i = 0; i < g.layers.size(); ++i) {
    const LayerSpec& l = g.layers[i];
    for (const std::string& name : l.inputs) {
      if (name == "embeddings") {
        if (in.columns.empty()) {
          return bad(l.line, absl::StrCat("layer \"", l.name,
                                          "\": \"embeddings\" but the schema has no categorical columns"));
        }
        for (size_t f = 0; f < in.columns.size(); ++f) r.layer_inputs[i].push_back(by_name[in.columns[f]]);
        continue;
      }
      auto it = by_name.find(name);
      if (it == by_name.end()) {
        return bad(l.line, absl::StrCat("layer \"", l.name, "\": no input or layer \"", name, "\"",
                                        Closest(name, known), name == "dense" ? " (the schema has no dense columns)" : ""));
      }
      if (it->second == r.layer_output[i]) {
        return bad(l.line, absl::StrCat("layer \"", l.name, "\" reads itself"));
      }
      r.layer_inputs[i].push_back(it->second);
    }
    for (int t : r.layer_inputs[i]) r.tensors[t].consumers.push_back(static_cast<int>(i));
  }
  r.layer_columns.assign(g.layers.size(), {});
  for (size_t i = 0; i < g.layers.size(); ++i) {
    const LayerSpec& l = g.layers[i];
    if (l.type != LayerType::kWide) continue;
    if (l.columns.empty()) {
      for (size_t f = 0; f < in.columns.size(); ++f) r.layer_columns[i].push_back(static_cast<int>(f));
    }
    for (const std::string& name : l.columns) {
      const auto col = std::find(in.columns.begin(), in.columns.end(), name);
      if (col == in.columns.end()) {
        return bad(l.line, absl::StrCat("layer \"", l.name, "\": \"columns\": no categorical column \"",
                                        name, "\"", Closest(name, in.columns)));
      }
      r.layer_columns[i].push_back(static_cast<int>(col - in.columns.begin()));
    }
  }
  r.layer_sequence.assign(g.layers.size(), -1);
  for (size_t i = 0; i < g.layers.size(); ++i) {
    const LayerSpec& l = g.layers[i];
    if (l.type != LayerType::kTargetAttention && l.type != LayerType::kSelfAttention) continue;
    const auto col = std::find(in.columns.begin(), in.columns.end(), l.sequence);
    if (col == in.columns.end()) {
      return bad(l.line, absl::StrCat("layer \"", l.name, "\": \"sequence\": no categorical column \"",
                                      l.sequence, "\"", Closest(l.sequence, in.columns)));
    }
    r.layer_sequence[i] = static_cast<int>(col - in.columns.begin());
  }
  // Order: Kahn's algorithm over the layers; what is left is a cycle.
  std::vector<int> pending(g.layers.size(), 0);
  for (size_t i = 0; i < g.layers.size(); ++i) {
    for (int t : r.layer_inputs[i]) pending[i] += r.tensors[t].layer >= 0 ? 1 : 0;
  }
  std::vector<int> ready;
  for (size_t i = 0; i < g.layers.size(); ++i) {
    if (pending[i] == 0) ready.push_back(static_cast<int>(i));
  }
  while (!ready.empty()) {
    const int i = ready.front();
    ready.erase(ready.begin());
    r.order.push_back(i);
    for (int c : r.tensors[r.layer_output[i]].consumers) {
      if (--pending[c] == 0) ready.push_back(c);
    }
  }
  if (r.order.size() != g.layers.size()) {
    // What is left is the cycles and what they feed; strip what no layer
    // left reads until only the cycles stay.
    for (bool stripped = true; stripped;) {
      stripped = false;
      for (size_t i = 0; i < g.layers.size(); ++i) {
        if (pending[i] <= 0) continue;
        bool read = false;
        for (int c : r.tensors[r.layer_output[i]].consumers) read = read || pending[c] > 0;
        if (!read) {
          pending[i] = 0;
          stripped = true;
        }
      }
    }
    std::vector<std::string> cycle;
    for (size_t i = 0; i < g.layers.size(); ++i) {
      if (pending[i] > 0) cycle.push_back(absl::StrCat("\"", g.layers[i].name, "\""));
    }
    const int first = static_cast<int>(
        std::find_if(pending.begin(), pending.end(), [](int p) { return p > 0; }) - pending.begin());
    return bad(g.layers[first].line,
               absl::StrCat("a cycle: layers ", absl::StrJoin(cycle, ", "), " read each other"));
  }
  // Widths, in order.
  for (int i : r.order) {
    const LayerSpec& l = g.layers[i];
    const std::vector<int>& ins = r.layer_inputs[i];
    const int in_width = r.InputWidth(i);
    const std::string layer = absl::StrCat("layer \"", l.name, "\" (", LayerTypeName(l.type), ")");
    int out = 0;
    const auto same_widths = [&]() -> absl::Status {
      for (int t : ins) {
        if (r.tensors[t].width != r.tensors[ins[0]].width) {
          return bad(l.line, absl::StrCat(layer, ": its inputs must be of one width; \"",
                                          r.tensors[ins[0]].name, "\" is ", r.tensors[ins[0]].width,
                                          " wide, \"", r.tensors[t].name, "\" ", r.tensors[t].width));
        }
      }
      return absl::OkStatus();
    };
    switch (l.type) {
      case LayerType::kMlp:
        out = l.widths.back();
        break;
      case LayerType::kLinear:
        out = l.width;
        break;
      case LayerType::kConcat:
      case LayerType::kCross:
        out = in_width;
        break;
      case LayerType::kDotInteraction: {
        if (ins.size() < 2) return bad(l.line, absl::StrCat(layer, " needs at least 2 inputs"));
        PS_RETURN_IF_ERROR(same_widths());
        const int n = static_cast<int>(ins.size());
        out = r.tensors[ins[0]].width + n * (n - 1) / 2;
        break;
      }
      case LayerType::kFm:
        if (ins.size() < 2) return bad(l.line, absl::StrCat(layer, " needs at least 2 inputs"));
        PS_RETURN_IF_ERROR(same_widths());
        out = 1;
        break;
      case LayerType::kWide:
        if (ins.size() > 1) return bad(l.line, absl::StrCat(layer, " takes one input (its linear part)"));
        out = 1;
        break;
      case LayerType::kAdd:
        PS_RETURN_IF_ERROR(same_widths());
        out = r.tensors[ins[0]].width;
        break;
      case LayerType::kSelfAttention: {
        const int d = in.dims[r.layer_sequence[i]];
        if (d % l.heads != 0) {
          return bad(l.line, absl::StrCat(layer, ": ", l.heads, " heads do not divide the items' width ",
                                          d, " (of \"", l.sequence, "\")"));
        }
        out = d;
        break;
      }
      case LayerType::kTargetAttention: {
        const int d = in.dims[r.layer_sequence[i]];
        if (in_width != d) {
          return bad(l.line, absl::StrCat(layer, ": its input (the target) is ", in_width,
                                          " wide, the items of \"", l.sequence, "\" ", d,
                                          "; they are compared element by element"));
        }
        out = d;
        break;
      }
    }
    if (in_width > kMaxWidth || out > kMaxWidth) {
      return bad(l.line, absl::StrCat(layer, ": ", std::max(in_width, out), " columns, more than ",
                                      kMaxWidth));
    }
    r.tensors[r.layer_output[i]].width = out;
  }
  for (const HeadSpec& h : g.heads) {
    auto it = by_name.find(h.input);
    if (it == by_name.end()) {
      return bad(h.line, absl::StrCat("head \"", h.name, "\": no layer \"", h.input, "\"",
                                      Closest(h.input, known)));
    }
    Tensor& t = r.tensors[it->second];
    if (t.layer < 0 || !t.consumers.empty()) {
      return bad(h.line, absl::StrCat("head \"", h.name, "\": \"", h.input, "\" ",
                                      t.layer < 0 ? "is an input" : "is read by another layer",
                                      "; a head's input is a layer of its own, its logit"));
    }
    if (t.width != 1) {
      return bad(h.line, absl::StrCat("head \"", h.name, "\": \"", h.input, "\" is ", t.width,
                                      " wide; a head's input is its logit, 1 wide (end the layer "
                                      "at width 1, or add a linear layer)"));
    }
    t.head = true;
    r.head_tensor.push_back(it->second);
  }
  // Use: every tensor reaches a head.
  std::vector<char> used(r.tensors.size(), 0);
  std::vector<int> stack(r.head_tensor.begin(), r.head_tensor.end());
  while (!stack.empty()) {
    const int t = stack.back();
    stack.pop_back();
    if (used[t]) continue;
    used[t] = 1;
    if (const int layer = r.tensors[t].layer; layer >= 0) {
      for (int x : r.layer_inputs[layer]) stack.push_back(x);
      std::vector<int> fields = r.layer_columns[layer];
      if (const int f = r.layer_sequence[layer]; f >= 0) fields.push_back(f);
      // The sequence's or wide layer's columns are used (their ids, not
      // their pooled embeddings).
      for (int f : fields) {
        for (size_t s = 0; s < r.tensors.size(); ++s) {
          if (r.tensors[s].field == f) used[s] = 1;
        }
      }
    }
  }
  for (size_t t = 0; t < r.tensors.size(); ++t) {
    if (used[t]) continue;
    const Tensor& x = r.tensors[t];
    if (x.layer >= 0) {
      return bad(g.layers[x.layer].line,
                 absl::StrCat("layer \"", x.name, "\": no head depends on it (remove it or use it)"));
    }
    return bad(1, absl::StrCat(x.kind == Tensor::Kind::kDense ? "the dense columns (\"dense\")"
                                                              : absl::StrCat("column \"", x.name, "\""),
                               " feed no layer: use them (\"dense\", \"", x.kind == Tensor::Kind::kDense ? "dense" : x.name,
                               "\" or \"embeddings\") or drop them from the schema"));
  }
  return r;
}

}  // namespace pstrain::worker::graph
