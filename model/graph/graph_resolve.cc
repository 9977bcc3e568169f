// ResolveGraph (model_graph.h): a model file's graph checked against the
// job's columns: inputs by name, table sharing, order, widths and use.
#include <algorithm>
#include <map>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/edit_distance.h"
#include "common/status.h"
#include "model/graph/model_graph.h"

namespace pstrain::worker::graph {

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
  // table_init names embedding tables: "emb.<column>" of a column with a
  // table of its own (not one whose ids are another's).
  std::vector<std::string> tables;
  for (size_t f = 0; f < in.columns.size(); ++f) {
    if (f >= in.ids_of.size() || in.ids_of[f] < 0) tables.push_back("emb." + in.columns[f]);
  }
  for (const ModelGraph::TableInit& t : g.table_init) {
    if (std::find(tables.begin(), tables.end(), t.table) != tables.end()) continue;
    std::string why;
    for (size_t f = 0; f < in.columns.size(); ++f) {
      if (t.table == "emb." + in.columns[f]) {
        why = absl::StrCat(" (\"", in.columns[f], "\" looks up \"emb.", in.columns[in.ids_of[f]],
                           "\": its ids are that column's)");
      }
    }
    return bad(t.line, absl::StrCat("\"table_init\": no embedding table \"", t.table, "\"",
                                    why.empty() ? DidYouMeanQuoted(t.table, tables) : why));
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
                                        DidYouMeanQuoted(name, known), name == "dense" ? " (the schema has no dense columns)" : ""));
      }
      if (it->second == r.layer_output[i]) {
        return bad(l.line, absl::StrCat("layer \"", l.name, "\" reads itself"));
      }
      r.layer_inputs[i].push_back(it->second);
    }
    r.layer_gate_inputs.push_back(0);
    if (l.type == LayerType::kGate) {
      // Its selector, then the experts it mixes.
      r.layer_gate_inputs[i] = static_cast<int>(r.layer_inputs[i].size());
      for (const std::string& name : l.experts) {
        auto it = by_name.find(name);
        const int layer = it == by_name.end() ? -1 : r.tensors[it->second].layer;
        if (layer < 0 || g.layers[layer].type != LayerType::kExperts) {
          std::vector<std::string> experts;
          for (const LayerSpec& e : g.layers) {
            if (e.type == LayerType::kExperts) experts.push_back(e.name);
          }
          return bad(l.line, absl::StrCat("layer \"", l.name, "\" (gate): \"experts\": \"", name,
                                          "\" is not an experts layer", DidYouMeanQuoted(name, experts),
                                          experts.empty() ? " (the file has none)" : ""));
        }
        r.layer_inputs[i].push_back(it->second);
      }
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
                                        name, "\"", DidYouMeanQuoted(name, in.columns)));
      }
      r.layer_columns[i].push_back(static_cast<int>(col - in.columns.begin()));
    }
  }
  r.layer_sequence.assign(g.layers.size(), -1);
  for (size_t i = 0; i < g.layers.size(); ++i) {
    const LayerSpec& l = g.layers[i];
    if (l.type != LayerType::kTargetAttention && l.type != LayerType::kSelfAttention &&
        l.type != LayerType::kPool) {
      continue;
    }
    const auto col = std::find(in.columns.begin(), in.columns.end(), l.sequence);
    if (col == in.columns.end()) {
      return bad(l.line, absl::StrCat("layer \"", l.name, "\": \"sequence\": no categorical column \"",
                                      l.sequence, "\"", DidYouMeanQuoted(l.sequence, in.columns)));
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
      case LayerType::kExperts:
        out = l.count * l.widths.back();
        break;
      case LayerType::kPool:
        out = in.dims[r.layer_sequence[i]];
        break;
      case LayerType::kGate: {
        const int k = r.layer_gate_inputs[i];
        int experts = 0;
        for (size_t e = k; e < ins.size(); ++e) {
          const LayerSpec& x = g.layers[r.tensors[ins[e]].layer];
          if (e > static_cast<size_t>(k) && x.widths.back() != out) {
            return bad(l.line, absl::StrCat(layer, ": its experts must be of one width; \"",
                                            l.experts[0], "\"'s are ", out, " wide, \"", x.name, "\"'s ",
                                            x.widths.back()));
          }
          out = x.widths.back();
          experts += x.count;
        }
        if (experts > 256) return bad(l.line, absl::StrCat(layer, ": ", experts, " experts, more than 256"));
        break;
      }
      case LayerType::kSelfAttention: {
        const int d = in.dims[r.layer_sequence[i]];
        if (!ins.empty() && in_width != d) {
          return bad(l.line, absl::StrCat(layer, ": its input (the target appended to each row's "
                                          "sequence) is ", in_width, " wide, the items of \"",
                                          l.sequence, "\" ", d));
        }
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
    if (in_width > kMaxGraphWidth || out > kMaxGraphWidth) {
      return bad(l.line, absl::StrCat(layer, ": ", std::max(in_width, out), " columns, more than ",
                                      kMaxGraphWidth));
    }
    r.tensors[r.layer_output[i]].width = out;
  }
  const std::vector<std::string> labels = in.labels.empty() ? std::vector<std::string>{"label"} : in.labels;
  for (const HeadSpec& h : g.heads) {
    int label = 0;
    if (!h.label.empty()) {
      const auto at = std::find(labels.begin(), labels.end(), h.label);
      if (at == labels.end()) {
        return bad(h.line, absl::StrCat("head \"", h.name, "\": no label \"", h.label, "\" in the schema",
                                        DidYouMeanQuoted(h.label, labels), " (its labels: ",
                                        absl::StrJoin(labels, ", "),
                                        "; more are named under the schema's \"labels\")"));
      }
      label = static_cast<int>(at - labels.begin());
    }
    if (&h == &g.heads[0] && h.regression) {
      return bad(h.line, absl::StrCat("head \"", h.name, "\": the first head is the job's headline "
                                      "(its AUC is the one --keep_best and the dashboard follow): make "
                                      "it a probability head (\"loss\": \"bce\") and list the "
                                      "regression head after it"));
    }
    r.head_label.push_back(label);
    auto it = by_name.find(h.input);
    if (it == by_name.end()) {
      return bad(h.line, absl::StrCat("head \"", h.name, "\": no layer \"", h.input, "\"",
                                      DidYouMeanQuoted(h.input, known)));
    }
    Tensor& t = r.tensors[it->second];
    if (t.head) {
      return bad(h.line, absl::StrCat("head \"", h.name, "\": \"", h.input,
                                      "\" is another head's logit; give each head a layer of its own"));
    }
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
