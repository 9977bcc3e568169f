// The enums of the Parquet format (parquet.thrift) that the reader acts on,
// with their names for error messages. Values read from a file are kept as
// raw int32_t where the file may hold a value this reader does not know
// (an encoding or codec of a newer format version), so that the error can
// name the number; the enums give the known ones.
#pragma once

#include <cstdint>
#include <string>

namespace pstrain::parquet {

// Physical (storage) types.
enum class PhysicalType : int32_t {
  kBoolean = 0,
  kInt32 = 1,
  kInt64 = 2,
  kInt96 = 3,
  kFloat = 4,
  kDouble = 5,
  kByteArray = 6,
  kFixedLenByteArray = 7,
};

enum class Repetition : int32_t { kRequired = 0, kOptional = 1, kRepeated = 2 };

enum class Encoding : int32_t {
  kPlain = 0,
  kPlainDictionary = 2,
  kRle = 3,
  kBitPacked = 4,
  kDeltaBinaryPacked = 5,
  kDeltaLengthByteArray = 6,
  kDeltaByteArray = 7,
  kRleDictionary = 8,
  kByteStreamSplit = 9,
};

enum class Codec : int32_t {
  kUncompressed = 0,
  kSnappy = 1,
  kGzip = 2,
  kLzo = 3,
  kBrotli = 4,
  kLz4 = 5,  // the deprecated LZ4 with Hadoop's framing
  kZstd = 6,
  kLz4Raw = 7,
};

enum class PageType : int32_t {
  kDataPage = 0,
  kIndexPage = 1,
  kDictionaryPage = 2,
  kDataPageV2 = 3,
};

// The deprecated ConvertedType annotation (still written next to the
// LogicalType, and alone by old writers).
enum class ConvertedType : int32_t {
  kUtf8 = 0,
  kMap = 1,
  kMapKeyValue = 2,
  kList = 3,
  kEnum = 4,
  kDecimal = 5,
  kDate = 6,
  kTimeMillis = 7,
  kTimeMicros = 8,
  kTimestampMillis = 9,
  kTimestampMicros = 10,
  kUint8 = 11,
  kUint16 = 12,
  kUint32 = 13,
  kUint64 = 14,
  kInt8 = 15,
  kInt16 = 16,
  kInt32 = 17,
  kInt64 = 18,
  kJson = 19,
  kBson = 20,
  kInterval = 21,
};

// What the values of a column mean (the LogicalType, or the ConvertedType
// of files without one), as the reader reports it.
enum class LogicalKind : uint8_t {
  kNone,             // plain numbers or bytes
  kString,           // UTF-8 text (BYTE_ARRAY)
  kEnum,             // BYTE_ARRAY
  kJson,             // BYTE_ARRAY
  kBson,             // BYTE_ARRAY
  kUuid,             // FIXED_LEN_BYTE_ARRAY(16)
  kFloat16,          // FIXED_LEN_BYTE_ARRAY(2), IEEE half, little-endian
  kDate,             // days since 1970-01-01 (INT32)
  kTimeMillis,       // since midnight (INT32)
  kTimeMicros,       // (INT64)
  kTimeNanos,        // (INT64)
  kTimestampMillis,  // since the Unix epoch (INT64)
  kTimestampMicros,  // (INT64)
  kTimestampNanos,   // (INT64; and INT96, converted on reading)
  kDecimal,          // unscaled integer * 10^-scale (INT32, INT64, FLBA, BYTE_ARRAY)
  kInt,              // an integer of int_bits bits, signed or not (INT32, INT64)
  kInterval,         // FIXED_LEN_BYTE_ARRAY(12): months, days, millis
  kNull,             // the UNKNOWN (always null) logical type
  kOther,            // an annotation this reader does not know
};

// Names for messages: "INT64", "SNAPPY", "DELTA_BYTE_ARRAY"; unknown values
// give e.g. "encoding 42".
std::string PhysicalTypeName(int32_t type);
std::string EncodingName(int32_t encoding);
std::string CodecName(int32_t codec);
const char* LogicalKindName(LogicalKind kind);

}  // namespace pstrain::parquet
