// Test helpers: a Thrift compact-protocol writer and a builder of small
// Parquet files from hand-made pages, for what the fixture writers cannot
// produce: page checksums, INT96, legacy list shapes, unsupported codecs,
// and corrupt or lying headers.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace pstrain::parquet::testing {

// Writes the Thrift compact protocol (the subset Parquet uses).
class ThriftWriter {
 public:
  enum Type : uint8_t {
    kTrue = 1,
    kFalse = 2,
    kByte = 3,
    kI16 = 4,
    kI32 = 5,
    kI64 = 6,
    kDouble = 7,
    kBinary = 8,
    kList = 9,
    kSet = 10,
    kMap = 11,
    kStruct = 12,
    kUuid = 13,
  };

  void BeginStruct() { last_.push_back(0); }
  void EndStruct() {
    out_.push_back(0);
    last_.pop_back();
  }
  void FieldHeader(int16_t id, Type type) {
    const int delta = id - last_.back();
    if (delta > 0 && delta <= 15) {
      out_.push_back(static_cast<char>((delta << 4) | type));
    } else {
      out_.push_back(static_cast<char>(type));
      Varint(ZigZag(id));
    }
    last_.back() = id;
  }
  void I32(int16_t id, int64_t v) {
    FieldHeader(id, kI32);
    Varint(ZigZag(v));
  }
  void I64(int16_t id, int64_t v) {
    FieldHeader(id, kI64);
    Varint(ZigZag(v));
  }
  void Bool(int16_t id, bool v) { FieldHeader(id, v ? kTrue : kFalse); }
  void Binary(int16_t id, const std::string& s) {
    FieldHeader(id, kBinary);
    RawBinary(s);
  }
  void Struct(int16_t id) {
    FieldHeader(id, kStruct);
    BeginStruct();
  }
  void List(int16_t id, Type elem, uint64_t n) {
    FieldHeader(id, kList);
    ListHeader(elem, n);
  }
  void ListHeader(Type elem, uint64_t n) {
    if (n < 15) {
      out_.push_back(static_cast<char>((n << 4) | elem));
    } else {
      out_.push_back(static_cast<char>(0xf0 | elem));
      Varint(n);
    }
  }
  void RawBinary(const std::string& s) {
    Varint(s.size());
    out_ += s;
  }
  void RawI32(int64_t v) { Varint(ZigZag(v)); }
  void Raw(const std::string& bytes) { out_ += bytes; }
  void Varint(uint64_t v) {
    while (v >= 0x80) {
      out_.push_back(static_cast<char>(v | 0x80));
      v >>= 7;
    }
    out_.push_back(static_cast<char>(v));
  }
  static uint64_t ZigZag(int64_t v) {
    return (static_cast<uint64_t>(v) << 1) ^ static_cast<uint64_t>(v >> 63);
  }

  const std::string& bytes() const { return out_; }

 private:
  std::string out_;
  std::vector<int16_t> last_;
};

// A page as it goes into the file: its header fields and its body (the
// bytes after the header, already compressed when the chunk's codec says
// so).
struct TestPage {
  int32_t type = 0;  // 0 data v1, 2 dictionary, 3 data v2
  std::string body;
  int32_t uncompressed_size = -1;  // -1: body.size()
  int32_t num_values = 0;
  int32_t encoding = 0;
  int32_t def_encoding = 3;  // RLE
  int32_t rep_encoding = 3;
  std::optional<uint32_t> crc;
  // v2
  int32_t num_nulls = 0;
  int32_t num_rows = 0;
  int32_t def_length = 0;
  int32_t rep_length = 0;
  bool is_compressed = true;
};

struct TestSchemaElement {
  std::string name;
  int32_t type = -1;  // -1: a group
  int32_t repetition = 0;
  int32_t num_children = 0;
  int32_t converted_type = -1;
  int32_t type_length = 0;
};

struct TestChunk {
  int32_t codec = 0;
  int64_t num_values = 0;
  std::vector<TestPage> pages;
  std::string path;  // dotted; split on '.'
  int32_t type = 0;
};

// A file of one row group: schema elements after the root (depth-first),
// one chunk per leaf.
std::string BuildFile(const std::vector<TestSchemaElement>& schema,
                      const std::vector<TestChunk>& chunks, int64_t num_rows);

// A serialized page header for `page`.
std::string PageHeaderBytes(const TestPage& page);

// PLAIN bytes of INT64 values; an RLE run of `n` copies of `value` with
// bit width `bit_width` (no length prefix); a 4-byte little-endian length.
std::string PlainInt64(const std::vector<int64_t>& values);
std::string RleRun(uint32_t n, uint32_t value, int bit_width);
std::string Le32(uint32_t v);

}  // namespace pstrain::parquet::testing
