#include "data/parquet/schema_tree.h"

#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/status.h"

namespace pstrain::parquet {
namespace {

// The schema as a tree of element indices.
struct Node {
  int element = 0;
  std::vector<int> children;  // node indices
};

class TreeBuilder {
 public:
  explicit TreeBuilder(const std::vector<SchemaElement>& schema) : schema_(schema) {}

  // Builds the subtree of the element at next_, `depth` deep; its node index.
  absl::StatusOr<int> Build(int depth) {
    if (depth > kMaxSchemaDepth) {
      return absl::DataLossError(absl::StrCat("schema nested deeper than ", kMaxSchemaDepth));
    }
    if (next_ >= schema_.size()) {
      return absl::DataLossError("schema ends inside a group (children counts do not add up)");
    }
    const int element = static_cast<int>(next_++);
    const SchemaElement& e = schema_[element];
    const int node = static_cast<int>(nodes_.size());
    nodes_.push_back(Node{element, {}});
    if (e.num_children < 0) {
      return absl::DataLossError(
          absl::StrCat("schema element \"", e.name, "\" has ", e.num_children, " children"));
    }
    // Each child takes an element of its own.
    if (static_cast<size_t>(e.num_children) > schema_.size() - next_) {
      return absl::DataLossError(absl::StrCat("schema element \"", e.name, "\" claims ",
                                              e.num_children, " children; the schema has ",
                                              schema_.size() - next_, " elements left"));
    }
    for (int i = 0; i < e.num_children; ++i) {
      absl::StatusOr<int> child = Build(depth + 1);
      if (!child.ok()) return child.status();
      nodes_[node].children.push_back(*child);
    }
    return node;
  }

  size_t consumed() const { return next_; }
  std::vector<Node>& nodes() { return nodes_; }

 private:
  const std::vector<SchemaElement>& schema_;
  size_t next_ = 0;
  std::vector<Node> nodes_;
};

bool IsLeaf(const SchemaElement& e) { return e.num_children == 0 && e.has_type; }
bool Is(const SchemaElement& e, Repetition r) {
  return e.has_repetition && e.repetition == static_cast<int32_t>(r);
}
bool IsListGroup(const SchemaElement& e) {
  return (e.has_logical_type && e.logical_type.is_list) ||
         (e.has_converted_type && e.converted_type == static_cast<int32_t>(ConvertedType::kList));
}
bool IsMapGroup(const SchemaElement& e) {
  return (e.has_logical_type && e.logical_type.is_map) ||
         (e.has_converted_type &&
          (e.converted_type == static_cast<int32_t>(ConvertedType::kMap) ||
           e.converted_type == static_cast<int32_t>(ConvertedType::kMapKeyValue)));
}

// The logical type of a leaf from its ConvertedType (files without a
// LogicalType).
void FromConvertedType(const SchemaElement& e, ColumnDescriptor* d) {
  using CT = ConvertedType;
  const auto ct = static_cast<CT>(e.converted_type);
  auto integer = [d](int bits, bool is_signed) {
    d->logical = LogicalKind::kInt;
    d->int_bits = bits;
    d->int_signed = is_signed;
  };
  switch (ct) {
    case CT::kUtf8: d->logical = LogicalKind::kString; break;
    case CT::kEnum: d->logical = LogicalKind::kEnum; break;
    case CT::kJson: d->logical = LogicalKind::kJson; break;
    case CT::kBson: d->logical = LogicalKind::kBson; break;
    case CT::kDecimal:
      d->logical = LogicalKind::kDecimal;
      d->scale = e.scale;
      d->precision = e.precision;
      break;
    case CT::kDate: d->logical = LogicalKind::kDate; break;
    case CT::kTimeMillis:
      d->logical = LogicalKind::kTimeMillis;
      d->utc = true;
      break;
    case CT::kTimeMicros:
      d->logical = LogicalKind::kTimeMicros;
      d->utc = true;
      break;
    case CT::kTimestampMillis:
      d->logical = LogicalKind::kTimestampMillis;
      d->utc = true;
      break;
    case CT::kTimestampMicros:
      d->logical = LogicalKind::kTimestampMicros;
      d->utc = true;
      break;
    case CT::kUint8: integer(8, false); break;
    case CT::kUint16: integer(16, false); break;
    case CT::kUint32: integer(32, false); break;
    case CT::kUint64: integer(64, false); break;
    case CT::kInt8: integer(8, true); break;
    case CT::kInt16: integer(16, true); break;
    case CT::kInt32: integer(32, true); break;
    case CT::kInt64: integer(64, true); break;
    case CT::kInterval: d->logical = LogicalKind::kInterval; break;
    default: d->logical = LogicalKind::kOther; break;
  }
}

// Fills the type fields of `d` from leaf `e`.
absl::Status SetLeafType(const SchemaElement& e, const std::string& path, ColumnDescriptor* d) {
  if (e.type < 0 || e.type > static_cast<int32_t>(PhysicalType::kFixedLenByteArray)) {
    return absl::DataLossError(
        absl::StrCat("column \"", path, "\" has unknown ", PhysicalTypeName(e.type)));
  }
  d->type = static_cast<PhysicalType>(e.type);
  if (d->type == PhysicalType::kFixedLenByteArray) {
    if (e.type_length <= 0) {
      return absl::DataLossError(
          absl::StrCat("column \"", path, "\" is FIXED_LEN_BYTE_ARRAY of length ", e.type_length));
    }
    d->type_length = e.type_length;
  }
  if (e.has_logical_type && e.logical_type.kind != LogicalKind::kNone) {
    const LogicalType& lt = e.logical_type;
    d->logical = lt.kind;
    d->scale = lt.scale;
    d->precision = lt.precision;
    d->int_bits = lt.bit_width;
    d->int_signed = lt.is_signed;
    d->utc = lt.utc;
  } else if (e.has_converted_type) {
    FromConvertedType(e, d);
  }
  if (d->type == PhysicalType::kInt96) d->logical = LogicalKind::kTimestampNanos;
  return absl::OkStatus();
}

class DescriptorBuilder {
 public:
  DescriptorBuilder(const std::vector<SchemaElement>& schema, const std::vector<Node>& nodes,
                    std::vector<ColumnDescriptor>* out)
      : schema_(schema), nodes_(nodes), out_(out) {}

  // One top-level field and the descriptors of its leaves.
  absl::Status AddField(int node) {
    const SchemaElement& e = element(node);
    if (IsLeaf(e)) {
      ColumnDescriptor d;
      d.name = d.path = e.name;
      if (Is(e, Repetition::kRepeated)) {  // legacy: a list of required values
        d.is_list = true;
        d.max_def = d.max_rep = 1;
        d.list_def = 0;
        d.element_def = 1;
      } else {
        d.nullable = Is(e, Repetition::kOptional);
        d.max_def = d.nullable ? 1 : 0;
      }
      PS_RETURN_IF_ERROR(SetLeafType(e, d.path, &d));
      out_->push_back(std::move(d));
      return absl::OkStatus();
    }
    // A group without children (no type either) has no column.
    if (e.num_children == 0) return absl::OkStatus();
    if (IsListGroup(e)) return AddList(node);
    return Unsupported(node, e.name,
                       IsMapGroup(e) ? "a map (only primitive and LIST columns are supported)"
                                     : "a struct (only primitive and LIST columns are supported)");
  }

 private:
  const SchemaElement& element(int node) const { return schema_[nodes_[node].element]; }

  // `optional group x (LIST) { repeated group list { optional T element } }`
  // or the legacy `... (LIST) { repeated T element }`.
  absl::Status AddList(int node) {
    const SchemaElement& e = element(node);
    const Node& n = nodes_[node];
    if (Is(e, Repetition::kRepeated) || n.children.size() != 1 ||
        !Is(element(n.children[0]), Repetition::kRepeated)) {
      return Unsupported(node, e.name, "a LIST group of an unknown shape");
    }
    ColumnDescriptor d;
    d.name = e.name;
    d.is_list = true;
    d.max_rep = 1;
    d.nullable = Is(e, Repetition::kOptional);
    d.list_def = d.nullable ? 1 : 0;
    d.element_def = d.list_def + 1;
    const int repeated = n.children[0];
    int leaf = repeated;
    if (!IsLeaf(element(repeated))) {
      // A repeated group of one field: that field is the element (a
      // single-field struct element, the legacy "array"/"_tuple" form, is
      // read as its field).
      const Node& r = nodes_[repeated];
      if (r.children.size() != 1) {
        return Unsupported(node, e.name, "a list of structs");
      }
      leaf = r.children[0];
      const SchemaElement& le = element(leaf);
      if (!IsLeaf(le)) {
        return Unsupported(node, e.name, IsListGroup(le) ? "a list of lists" : "a list of structs");
      }
      if (Is(le, Repetition::kRepeated)) return Unsupported(node, e.name, "a list of lists");
    }
    const SchemaElement& le = element(leaf);
    d.max_def = d.element_def + (leaf != repeated && Is(le, Repetition::kOptional) ? 1 : 0);
    d.path = e.name + "." + element(repeated).name;
    if (leaf != repeated) d.path += "." + le.name;
    PS_RETURN_IF_ERROR(SetLeafType(le, d.path, &d));
    out_->push_back(std::move(d));
    return absl::OkStatus();
  }

  // Every leaf under `node` gets a descriptor that refuses reading.
  absl::Status Unsupported(int node, const std::string& field, const std::string& what) {
    return AddUnsupportedLeaves(node, element(node).name,
                                absl::StrCat("field \"", field, "\" is ", what));
  }
  absl::Status AddUnsupportedLeaves(int node, const std::string& path, const std::string& reason) {
    const SchemaElement& e = element(node);
    if (IsLeaf(e)) {
      ColumnDescriptor d;
      d.name = d.path = path;
      d.unsupported = reason;
      PS_RETURN_IF_ERROR(SetLeafType(e, path, &d));
      out_->push_back(std::move(d));
      return absl::OkStatus();
    }
    for (int child : nodes_[node].children) {
      PS_RETURN_IF_ERROR(AddUnsupportedLeaves(child, path + "." + element(child).name, reason));
    }
    return absl::OkStatus();
  }

  const std::vector<SchemaElement>& schema_;
  const std::vector<Node>& nodes_;
  std::vector<ColumnDescriptor>* out_;
};

}  // namespace

absl::StatusOr<std::vector<ColumnDescriptor>> BuildColumnDescriptors(
    const std::vector<SchemaElement>& schema) {
  if (schema.empty()) return absl::DataLossError("empty schema");
  TreeBuilder tree(schema);
  absl::StatusOr<int> root = tree.Build(0);
  if (!root.ok()) return root.status();
  if (tree.consumed() != schema.size()) {
    return absl::DataLossError(absl::StrCat("schema has ", schema.size() - tree.consumed(),
                                            " elements after its root's children"));
  }
  std::vector<ColumnDescriptor> columns;
  DescriptorBuilder builder(schema, tree.nodes(), &columns);
  for (int child : tree.nodes()[*root].children) {
    absl::Status st = builder.AddField(child);
    if (!st.ok()) return st;
  }
  return columns;
}

}  // namespace pstrain::parquet
