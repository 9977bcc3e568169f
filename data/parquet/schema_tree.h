// The column descriptors of a Parquet schema: the flattened schema tree of
// the footer (depth-first, the root first) turned into one ColumnDescriptor
// per leaf, in leaf order, which is the order of the column chunks in each
// row group. Computes each leaf's maximum definition and repetition levels,
// its logical type (from the LogicalType, else the ConvertedType), and
// recognises the LIST shapes described in column.h.
#pragma once

#include <vector>

#include "absl/status/statusor.h"
#include "data/parquet/column.h"
#include "data/parquet/metadata.h"

namespace pstrain::parquet {

// Schemas nest at most this deep.
inline constexpr int kMaxSchemaDepth = 64;

// DataLoss when the schema is not a tree (children counts that do not add
// up, a leaf without a type, a FIXED_LEN_BYTE_ARRAY without a length, too
// deep). Shapes the reader cannot read are not errors here: their leaves
// get `unsupported` set.
absl::StatusOr<std::vector<ColumnDescriptor>> BuildColumnDescriptors(
    const std::vector<SchemaElement>& schema);

}  // namespace pstrain::parquet
