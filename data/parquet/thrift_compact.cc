#include "data/parquet/thrift_compact.h"

#include <cstring>

#include "absl/strings/str_cat.h"

namespace pstrain::parquet {
namespace {

using Type = CompactReader::Type;

bool IsInteger(Type t) {
  return t == Type::kByte || t == Type::kI16 || t == Type::kI32 || t == Type::kI64;
}

}  // namespace

CompactReader::CompactReader(std::string_view bytes)
    : data_(reinterpret_cast<const uint8_t*>(bytes.data())), size_(bytes.size()) {}

void CompactReader::Fail(std::string_view message) {
  if (status_.ok()) {
    status_ = absl::DataLossError(absl::StrCat(std::string(message), " (thrift byte ", pos_, ")"));
  }
  pos_ = size_;  // nothing more is read
}

bool CompactReader::ReadByte(uint8_t* b) {
  if (!ok()) return false;
  if (pos_ >= size_) {
    Fail("truncated thrift data");
    return false;
  }
  *b = data_[pos_++];
  return true;
}

uint64_t CompactReader::ReadVarint() {
  uint64_t v = 0;
  for (int shift = 0; shift < 64; shift += 7) {
    uint8_t b;
    if (!ReadByte(&b)) return 0;
    v |= static_cast<uint64_t>(b & 0x7f) << shift;
    if ((b & 0x80) == 0) return v;
  }
  Fail("thrift varint longer than 10 bytes");
  return 0;
}

void CompactReader::SkipBytes(uint64_t n) {
  if (!ok()) return;
  if (n > remaining()) {
    Fail(absl::StrCat("thrift value of ", n, " bytes, only ", remaining(), " left"));
    return;
  }
  pos_ += n;
}

void CompactReader::BeginStruct() {
  if (!ok()) return;
  if (depth_ >= kMaxDepth) {
    Fail("thrift structs nested too deep");
    return;
  }
  last_id_[depth_++] = 0;
}

bool CompactReader::NextField(Field* field) {
  uint8_t b;
  if (depth_ == 0) Fail("thrift field read outside a struct");
  if (!ReadByte(&b)) return false;
  if (b == 0) {
    --depth_;
    return false;
  }
  const auto type = static_cast<Type>(b & 0x0f);
  if (type == Type::kStop || static_cast<uint8_t>(type) > static_cast<uint8_t>(Type::kUuid)) {
    Fail(absl::StrCat("unknown thrift type ", b & 0x0f));
    return false;
  }
  const int delta = b >> 4;
  int64_t id;
  if (delta == 0) {
    id = ReadZigZag();
    if (id < INT16_MIN || id > INT16_MAX) Fail("thrift field id out of range");
  } else {
    id = last_id_[depth_ - 1] + delta;
    if (id > INT16_MAX) Fail("thrift field id out of range");
  }
  if (!ok()) return false;
  last_id_[depth_ - 1] = static_cast<int16_t>(id);
  field->id = static_cast<int16_t>(id);
  field->type = type;
  return true;
}

int64_t CompactReader::ReadInt(Type type) {
  if (!ok()) return 0;
  if (!IsInteger(type)) {
    Fail(absl::StrCat("expected a thrift integer, found type ", static_cast<int>(type)));
    return 0;
  }
  if (type == Type::kByte) {
    uint8_t b = 0;
    ReadByte(&b);
    return static_cast<int8_t>(b);
  }
  return ReadZigZag();
}

int32_t CompactReader::ReadI32(Type type) {
  const int64_t v = ReadInt(type);
  if (v < INT32_MIN || v > INT32_MAX) {
    Fail(absl::StrCat("thrift i32 value ", v, " out of range"));
    return 0;
  }
  return static_cast<int32_t>(v);
}

bool CompactReader::ReadBool(Type type) {
  if (type == Type::kTrue) return true;
  if (type != Type::kFalse) {
    Fail(absl::StrCat("expected a thrift bool, found type ", static_cast<int>(type)));
  }
  return false;
}

std::string_view CompactReader::ReadBinary(Type type) {
  if (!ok()) return {};
  if (type != Type::kBinary) {
    Fail(absl::StrCat("expected thrift binary, found type ", static_cast<int>(type)));
    return {};
  }
  const uint64_t n = ReadVarint();
  if (!ok()) return {};
  if (n > remaining()) {
    Fail(absl::StrCat("thrift string of ", n, " bytes, only ", remaining(), " left"));
    return {};
  }
  std::string_view v(reinterpret_cast<const char*>(data_ + pos_), n);
  pos_ += n;
  return v;
}

int64_t CompactReader::ReadListHeader(Type type, Type* element_type) {
  *element_type = Type::kStop;
  if (!ok()) return 0;
  if (type != Type::kList && type != Type::kSet) {
    Fail(absl::StrCat("expected a thrift list, found type ", static_cast<int>(type)));
    return 0;
  }
  uint8_t b;
  if (!ReadByte(&b)) return 0;
  uint64_t n = b >> 4;
  if (n == 15) n = ReadVarint();
  const auto elem = static_cast<Type>(b & 0x0f);
  if (elem == Type::kStop || static_cast<uint8_t>(elem) > static_cast<uint8_t>(Type::kUuid)) {
    Fail(absl::StrCat("unknown thrift list element type ", b & 0x0f));
    return 0;
  }
  // Every element takes at least one byte.
  if (ok() && n > remaining()) {
    Fail(absl::StrCat("thrift list of ", n, " elements, only ", remaining(), " bytes left"));
  }
  if (!ok()) return 0;
  *element_type = elem;
  return static_cast<int64_t>(n);
}

void CompactReader::Skip(Type type) { SkipValue(type, /*in_list=*/false, depth_); }

void CompactReader::SkipValue(Type type, bool in_list, int depth) {
  if (!ok()) return;
  switch (type) {
    case Type::kTrue:
    case Type::kFalse:
      if (in_list) SkipBytes(1);
      return;
    case Type::kByte: SkipBytes(1); return;
    case Type::kI16:
    case Type::kI32:
    case Type::kI64: ReadVarint(); return;
    case Type::kDouble: SkipBytes(8); return;
    case Type::kUuid: SkipBytes(16); return;
    case Type::kBinary: SkipBytes(ReadVarint()); return;
    case Type::kList:
    case Type::kSet: {
      if (depth >= kMaxDepth) return Fail("thrift values nested too deep");
      Type elem;
      const int64_t n = ReadListHeader(type, &elem);
      for (int64_t i = 0; i < n && ok(); ++i) SkipValue(elem, /*in_list=*/true, depth + 1);
      return;
    }
    case Type::kMap: {
      if (depth >= kMaxDepth) return Fail("thrift values nested too deep");
      const uint64_t n = ReadVarint();
      if (n == 0 || !ok()) return;
      uint8_t kv;
      if (!ReadByte(&kv)) return;
      // Each entry takes at least two bytes.
      if (n > remaining() / 2) {
        return Fail(
            absl::StrCat("thrift map of ", n, " entries, only ", remaining(), " bytes left"));
      }
      const auto key = static_cast<Type>(kv >> 4), value = static_cast<Type>(kv & 0x0f);
      for (uint64_t i = 0; i < n && ok(); ++i) {
        SkipValue(key, /*in_list=*/true, depth + 1);
        SkipValue(value, /*in_list=*/true, depth + 1);
      }
      return;
    }
    case Type::kStruct: SkipStruct(depth + 1); return;
    case Type::kStop: break;
  }
  Fail(absl::StrCat("cannot skip thrift type ", static_cast<int>(type)));
}

void CompactReader::SkipStruct(int depth) {
  if (depth >= kMaxDepth) return Fail("thrift values nested too deep");
  BeginStruct();
  Field f;
  while (NextField(&f)) SkipValue(f.type, /*in_list=*/false, depth);
}

}  // namespace pstrain::parquet
