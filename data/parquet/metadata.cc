#include "data/parquet/metadata.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "data/parquet/thrift_compact.h"

namespace pstrain::parquet {
namespace {

using Type = CompactReader::Type;
using Field = CompactReader::Field;

// Each decoder reads one struct (the reader is placed at its first field)
// and notes which required fields it saw.

// Enters the struct value of field `type`; false (with an error) when the
// field is not a struct.
bool EnterStruct(CompactReader& r, Type type) {
  if (type != Type::kStruct) {
    r.Fail(absl::StrCat("expected a thrift struct, found type ", static_cast<int>(type)));
    return false;
  }
  r.BeginStruct();
  return r.ok();
}

// TimeUnit union: 1 MILLIS, 2 MICROS, 3 NANOS (each an empty struct).
int DecodeTimeUnit(CompactReader& r, Type type) {
  if (!EnterStruct(r, type)) return 0;
  int unit = 0;
  Field f;
  while (r.NextField(&f)) {
    if (f.id >= 1 && f.id <= 3 && f.type == Type::kStruct) unit = f.id;
    r.Skip(f.type);
  }
  return unit;
}

// TimeType and TimestampType: 1 isAdjustedToUTC, 2 unit.
void DecodeTimeType(CompactReader& r, Type type, LogicalKind millis, LogicalType* out) {
  if (!EnterStruct(r, type)) return;
  int unit = 0;
  Field f;
  while (r.NextField(&f)) {
    if (f.id == 1) {
      out->utc = r.ReadBool(f.type);
    } else if (f.id == 2) {
      unit = DecodeTimeUnit(r, f.type);
    } else {
      r.Skip(f.type);
    }
  }
  // millis, micros, nanos follow each other in LogicalKind.
  out->kind = unit == 0 ? LogicalKind::kOther
                        : static_cast<LogicalKind>(static_cast<int>(millis) + unit - 1);
}

// The LogicalType union: exactly one field set.
void DecodeLogicalType(CompactReader& r, Type type, LogicalType* out) {
  if (!EnterStruct(r, type)) return;
  Field f;
  while (r.NextField(&f)) {
    if (f.type != Type::kStruct) {
      r.Skip(f.type);
      continue;
    }
    switch (f.id) {
      case 1: out->kind = LogicalKind::kString; break;
      case 2: out->is_map = true; break;
      case 3: out->is_list = true; break;
      case 4: out->kind = LogicalKind::kEnum; break;
      case 5: {  // DecimalType: 1 scale, 2 precision
        out->kind = LogicalKind::kDecimal;
        r.BeginStruct();
        Field d;
        while (r.NextField(&d)) {
          if (d.id == 1) {
            out->scale = r.ReadI32(d.type);
          } else if (d.id == 2) {
            out->precision = r.ReadI32(d.type);
          } else {
            r.Skip(d.type);
          }
        }
        continue;
      }
      case 6: out->kind = LogicalKind::kDate; break;
      case 7: DecodeTimeType(r, f.type, LogicalKind::kTimeMillis, out); continue;
      case 8: DecodeTimeType(r, f.type, LogicalKind::kTimestampMillis, out); continue;
      case 10: {  // IntType: 1 bitWidth (i8), 2 isSigned
        out->kind = LogicalKind::kInt;
        r.BeginStruct();
        Field d;
        while (r.NextField(&d)) {
          if (d.id == 1) {
            out->bit_width = static_cast<int32_t>(r.ReadInt(d.type));
          } else if (d.id == 2) {
            out->is_signed = r.ReadBool(d.type);
          } else {
            r.Skip(d.type);
          }
        }
        continue;
      }
      case 11: out->kind = LogicalKind::kNull; break;
      case 12: out->kind = LogicalKind::kJson; break;
      case 13: out->kind = LogicalKind::kBson; break;
      case 14: out->kind = LogicalKind::kUuid; break;
      case 15: out->kind = LogicalKind::kFloat16; break;
      default: out->kind = LogicalKind::kOther; break;
    }
    r.Skip(f.type);
  }
}

void DecodeSchemaElement(CompactReader& r, Type type, SchemaElement* e) {
  if (!EnterStruct(r, type)) return;
  bool has_name = false;
  Field f;
  while (r.NextField(&f)) {
    switch (f.id) {
      case 1:
        e->type = r.ReadI32(f.type);
        e->has_type = true;
        break;
      case 2: e->type_length = r.ReadI32(f.type); break;
      case 3:
        e->repetition = r.ReadI32(f.type);
        e->has_repetition = true;
        break;
      case 4:
        e->name = std::string(r.ReadBinary(f.type));
        has_name = true;
        break;
      case 5: e->num_children = r.ReadI32(f.type); break;
      case 6:
        e->converted_type = r.ReadI32(f.type);
        e->has_converted_type = true;
        break;
      case 7: e->scale = r.ReadI32(f.type); break;
      case 8: e->precision = r.ReadI32(f.type); break;
      case 10:
        DecodeLogicalType(r, f.type, &e->logical_type);
        e->has_logical_type = true;
        break;
      default: r.Skip(f.type);
    }
  }
  if (r.ok() && !has_name) r.Fail("schema element without a name");
}

// Reads a list<string> field.
void DecodeStringList(CompactReader& r, Type type, std::vector<std::string>* out) {
  Type elem;
  const int64_t n = r.ReadListHeader(type, &elem);
  for (int64_t i = 0; i < n && r.ok(); ++i) out->emplace_back(r.ReadBinary(elem));
}

void DecodeColumnMetaData(CompactReader& r, Type type, ColumnMetaData* m) {
  if (!EnterStruct(r, type)) return;
  unsigned seen = 0;
  Field f;
  while (r.NextField(&f)) {
    switch (f.id) {
      case 1: m->type = r.ReadI32(f.type); break;
      case 3: DecodeStringList(r, f.type, &m->path_in_schema); break;
      case 4: m->codec = r.ReadI32(f.type); break;
      case 5: m->num_values = r.ReadInt(f.type); break;
      case 6: m->total_uncompressed_size = r.ReadInt(f.type); break;
      case 7: m->total_compressed_size = r.ReadInt(f.type); break;
      case 9: m->data_page_offset = r.ReadInt(f.type); break;
      case 11:
        m->dictionary_page_offset = r.ReadInt(f.type);
        m->has_dictionary_page_offset = true;
        break;
      default: r.Skip(f.type); continue;
    }
    if (f.id < 32) seen |= 1u << f.id;
  }
  // 1 type, 3 path_in_schema, 4 codec, 5 num_values, 7 total_compressed_size,
  // 9 data_page_offset.
  constexpr unsigned kRequired =
      (1u << 1) | (1u << 3) | (1u << 4) | (1u << 5) | (1u << 7) | (1u << 9);
  if (r.ok() && (seen & kRequired) != kRequired) {
    r.Fail("column metadata without a required field");
  }
}

void DecodeColumnChunk(CompactReader& r, Type type, ColumnChunk* c) {
  if (!EnterStruct(r, type)) return;
  Field f;
  while (r.NextField(&f)) {
    switch (f.id) {
      case 1:
        r.Skip(f.type);
        c->has_file_path = true;
        break;
      case 3:
        DecodeColumnMetaData(r, f.type, &c->meta_data);
        c->has_meta_data = true;
        break;
      case 8:
      case 9:
        r.Skip(f.type);
        c->encrypted = true;
        break;
      default: r.Skip(f.type);
    }
  }
}

void DecodeRowGroup(CompactReader& r, Type type, RowGroup* g) {
  if (!EnterStruct(r, type)) return;
  bool has_columns = false, has_rows = false;
  Field f;
  while (r.NextField(&f)) {
    if (f.id == 1) {
      Type elem;
      const int64_t n = r.ReadListHeader(f.type, &elem);
      // Grown as elements decode, not by the count: a corrupt count stops at
      // the first element that is not there.
      for (int64_t i = 0; i < n && r.ok(); ++i) {
        DecodeColumnChunk(r, elem, &g->columns.emplace_back());
      }
      has_columns = true;
    } else if (f.id == 3) {
      g->num_rows = r.ReadInt(f.type);
      has_rows = true;
    } else {
      r.Skip(f.type);
    }
  }
  if (r.ok() && !(has_columns && has_rows)) r.Fail("row group without columns or num_rows");
}

}  // namespace

absl::StatusOr<FileMetaData> DecodeFileMetaData(std::string_view bytes) {
  FileMetaData md;
  CompactReader r(bytes);
  bool has_schema = false, has_rows = false, has_row_groups = false;
  r.BeginStruct();
  Field f;
  while (r.NextField(&f)) {
    switch (f.id) {
      case 1: md.version = r.ReadI32(f.type); break;
      case 2: {
        Type elem;
        const int64_t n = r.ReadListHeader(f.type, &elem);
        for (int64_t i = 0; i < n && r.ok(); ++i) {
          DecodeSchemaElement(r, elem, &md.schema.emplace_back());
        }
        has_schema = true;
        break;
      }
      case 3:
        md.num_rows = r.ReadInt(f.type);
        has_rows = true;
        break;
      case 4: {
        Type elem;
        const int64_t n = r.ReadListHeader(f.type, &elem);
        for (int64_t i = 0; i < n && r.ok(); ++i) {
          DecodeRowGroup(r, elem, &md.row_groups.emplace_back());
        }
        has_row_groups = true;
        break;
      }
      case 6: md.created_by = std::string(r.ReadBinary(f.type)); break;
      case 8:
        r.Skip(f.type);
        md.encrypted = true;
        break;
      default: r.Skip(f.type);
    }
  }
  if (r.ok() && !(has_schema && has_rows && has_row_groups)) {
    r.Fail("file metadata without schema, num_rows or row_groups");
  }
  if (!r.ok()) {
    return absl::DataLossError(absl::StrCat("corrupt file metadata: ", r.status().message()));
  }
  return md;
}

}  // namespace pstrain::parquet
