#include "data/parquet/types.h"

#include "absl/strings/str_cat.h"

namespace pstrain::parquet {

std::string PhysicalTypeName(int32_t type) {
  static const char* const kNames[] = {"BOOLEAN", "INT32",  "INT64",      "INT96",
                                       "FLOAT",   "DOUBLE", "BYTE_ARRAY", "FIXED_LEN_BYTE_ARRAY"};
  if (type >= 0 && type < 8) return kNames[type];
  return absl::StrCat("physical type ", type);
}

std::string EncodingName(int32_t encoding) {
  static const char* const kNames[] = {
      "PLAIN",          "GROUP_VAR_INT",       "PLAIN_DICTIONARY",        "RLE",
      "BIT_PACKED",     "DELTA_BINARY_PACKED", "DELTA_LENGTH_BYTE_ARRAY", "DELTA_BYTE_ARRAY",
      "RLE_DICTIONARY", "BYTE_STREAM_SPLIT"};
  if (encoding >= 0 && encoding < 10) return kNames[encoding];
  return absl::StrCat("encoding ", encoding);
}

std::string CodecName(int32_t codec) {
  static const char* const kNames[] = {"UNCOMPRESSED", "SNAPPY", "GZIP", "LZO",
                                       "BROTLI",       "LZ4",    "ZSTD", "LZ4_RAW"};
  if (codec >= 0 && codec < 8) return kNames[codec];
  return absl::StrCat("compression codec ", codec);
}

const char* LogicalKindName(LogicalKind kind) {
  switch (kind) {
    case LogicalKind::kNone: return "none";
    case LogicalKind::kString: return "string";
    case LogicalKind::kEnum: return "enum";
    case LogicalKind::kJson: return "json";
    case LogicalKind::kBson: return "bson";
    case LogicalKind::kUuid: return "uuid";
    case LogicalKind::kFloat16: return "float16";
    case LogicalKind::kDate: return "date";
    case LogicalKind::kTimeMillis: return "time(ms)";
    case LogicalKind::kTimeMicros: return "time(us)";
    case LogicalKind::kTimeNanos: return "time(ns)";
    case LogicalKind::kTimestampMillis: return "timestamp(ms)";
    case LogicalKind::kTimestampMicros: return "timestamp(us)";
    case LogicalKind::kTimestampNanos: return "timestamp(ns)";
    case LogicalKind::kDecimal: return "decimal";
    case LogicalKind::kInt: return "int";
    case LogicalKind::kInterval: return "interval";
    case LogicalKind::kNull: return "null";
    case LogicalKind::kOther: return "other";
  }
  return "?";
}

}  // namespace pstrain::parquet
