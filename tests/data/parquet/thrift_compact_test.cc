// The Thrift compact reader: unknown fields of every type are skipped,
// and malformed input is an error, never a crash or a large allocation.
#include "data/parquet/thrift_compact.h"

#include <gtest/gtest.h>

#include <string>

#include "tests/data/parquet/parquet_builder.h"

namespace pstrain::parquet {
namespace {

using testing::ThriftWriter;
using Type = CompactReader::Type;

// Reads fields 1 and 300 (i32) of a struct, skipping the rest.
absl::Status ReadKnown(const std::string& bytes, int64_t* a, int64_t* b) {
  CompactReader r(bytes);
  r.BeginStruct();
  CompactReader::Field f;
  while (r.NextField(&f)) {
    if (f.id == 1) {
      *a = r.ReadI32(f.type);
    } else if (f.id == 300) {
      *b = r.ReadI32(f.type);
    } else {
      r.Skip(f.type);
    }
  }
  return r.status();
}

TEST(ThriftCompact, SkipsUnknownFieldsOfEveryType) {
  ThriftWriter w;
  w.BeginStruct();
  w.I32(1, -7);
  w.Bool(2, true);
  w.FieldHeader(3, ThriftWriter::kByte);
  w.Raw("\x05");
  w.FieldHeader(4, ThriftWriter::kI16);
  w.RawI32(-300);
  w.I64(5, int64_t{1} << 50);
  w.FieldHeader(6, ThriftWriter::kDouble);
  w.Raw(std::string(8, '\x11'));
  w.Binary(7, "some bytes");
  w.List(8, ThriftWriter::kStruct, 2);  // list<struct>
  for (int i = 0; i < 2; ++i) {
    w.BeginStruct();
    w.I32(1, i);
    w.List(2, ThriftWriter::kTrue, 3);  // bools in a list: a byte each
    w.Raw("\x01\x02\x01");
    w.EndStruct();
  }
  w.FieldHeader(9, ThriftWriter::kSet);
  w.ListHeader(ThriftWriter::kI32, 20);  // the long form of the count
  for (int i = 0; i < 20; ++i) w.RawI32(i * 1000);
  w.FieldHeader(10, ThriftWriter::kMap);  // map<binary, list<i64>>
  w.Varint(2);
  w.Raw(std::string(1, static_cast<char>((ThriftWriter::kBinary << 4) | ThriftWriter::kList)));
  for (int i = 0; i < 2; ++i) {
    w.RawBinary("k");
    w.ListHeader(ThriftWriter::kI64, 1);
    w.RawI32(99);
  }
  w.FieldHeader(11, ThriftWriter::kMap);  // an empty map: no type byte
  w.Varint(0);
  w.Struct(12);  // nested structs
  w.Struct(1);
  w.Binary(3, "deep");
  w.EndStruct();
  w.EndStruct();
  w.FieldHeader(13, ThriftWriter::kUuid);
  w.Raw(std::string(16, '\x22'));
  w.I32(300, 12345);  // an id that needs the long form
  w.EndStruct();
  int64_t a = 0, b = 0;
  absl::Status st = ReadKnown(w.bytes(), &a, &b);
  ASSERT_TRUE(st.ok()) << st;
  EXPECT_EQ(a, -7);
  EXPECT_EQ(b, 12345);
}

TEST(ThriftCompact, DeepNestingIsAnError) {
  ThriftWriter w;
  w.BeginStruct();
  for (int i = 0; i < 1000; ++i) w.Struct(2);
  int64_t a, b;
  EXPECT_EQ(ReadKnown(w.bytes(), &a, &b).code(), absl::StatusCode::kDataLoss);
}

TEST(ThriftCompact, CountsLargerThanTheBytesAreErrors) {
  for (auto type : {ThriftWriter::kList, ThriftWriter::kMap, ThriftWriter::kBinary}) {
    ThriftWriter w;
    w.BeginStruct();
    w.FieldHeader(2, type);
    if (type == ThriftWriter::kList) {
      w.ListHeader(ThriftWriter::kI32, uint64_t{1} << 40);
    } else {
      w.Varint(uint64_t{1} << 40);
      if (type == ThriftWriter::kMap) w.Raw("\x55");
    }
    w.Raw(std::string(10, '\0'));
    int64_t a, b;
    absl::Status st = ReadKnown(w.bytes(), &a, &b);
    EXPECT_EQ(st.code(), absl::StatusCode::kDataLoss) << type;
    EXPECT_NE(st.message().find("left"), std::string::npos) << st;
  }
}

TEST(ThriftCompact, TruncationAnywhereIsAnError) {
  ThriftWriter w;
  w.BeginStruct();
  w.I32(1, 123456);
  w.Binary(2, "abcdef");
  w.I64(300, -5);
  w.EndStruct();
  const std::string bytes = w.bytes();
  for (size_t n = 0; n < bytes.size(); ++n) {
    int64_t a, b;
    EXPECT_EQ(ReadKnown(bytes.substr(0, n), &a, &b).code(), absl::StatusCode::kDataLoss) << n;
  }
}

TEST(ThriftCompact, WrongWireTypeForAKnownFieldIsAnError) {
  ThriftWriter w;
  w.BeginStruct();
  w.Binary(1, "not an int");
  w.EndStruct();
  int64_t a, b;
  EXPECT_EQ(ReadKnown(w.bytes(), &a, &b).code(), absl::StatusCode::kDataLoss);
}

TEST(ThriftCompact, OverlongVarintIsAnError) {
  std::string bytes = "\x15";  // field 1, i32
  bytes += std::string(11, '\xff');
  int64_t a, b;
  EXPECT_EQ(ReadKnown(bytes, &a, &b).code(), absl::StatusCode::kDataLoss);
}

}  // namespace
}  // namespace pstrain::parquet
