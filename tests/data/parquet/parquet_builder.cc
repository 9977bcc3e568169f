#include "tests/data/parquet/parquet_builder.h"

#include <cstring>

namespace pstrain::parquet::testing {

std::string Le32(uint32_t v) {
  std::string s(4, '\0');
  std::memcpy(s.data(), &v, 4);
  return s;
}

std::string PlainInt64(const std::vector<int64_t>& values) {
  std::string s(values.size() * 8, '\0');
  if (!values.empty()) std::memcpy(s.data(), values.data(), s.size());
  return s;
}

std::string RleRun(uint32_t n, uint32_t value, int bit_width) {
  ThriftWriter w;
  w.Varint(uint64_t{n} << 1);
  std::string s = w.bytes();
  for (int i = 0; i < (bit_width + 7) / 8; ++i) s.push_back(static_cast<char>(value >> (8 * i)));
  return s;
}

std::string PageHeaderBytes(const TestPage& p) {
  ThriftWriter w;
  w.BeginStruct();
  w.I32(1, p.type);
  w.I32(2, p.uncompressed_size >= 0 ? p.uncompressed_size : static_cast<int64_t>(p.body.size()));
  w.I32(3, static_cast<int64_t>(p.body.size()));
  if (p.crc) w.I32(4, static_cast<int32_t>(*p.crc));
  if (p.type == 0) {
    w.Struct(5);
    w.I32(1, p.num_values);
    w.I32(2, p.encoding);
    w.I32(3, p.def_encoding);
    w.I32(4, p.rep_encoding);
    w.EndStruct();
  } else if (p.type == 2) {
    w.Struct(7);
    w.I32(1, p.num_values);
    w.I32(2, p.encoding);
    w.EndStruct();
  } else if (p.type == 3) {
    w.Struct(8);
    w.I32(1, p.num_values);
    w.I32(2, p.num_nulls);
    w.I32(3, p.num_rows);
    w.I32(4, p.encoding);
    w.I32(5, p.def_length);
    w.I32(6, p.rep_length);
    w.Bool(7, p.is_compressed);
    w.EndStruct();
  }
  w.EndStruct();
  return w.bytes();
}

std::string BuildFile(const std::vector<TestSchemaElement>& schema,
                      const std::vector<TestChunk>& chunks, int64_t num_rows) {
  std::string file = "PAR1";
  struct Placed {
    int64_t start, data_page, size;
    bool dict;
  };
  std::vector<Placed> placed;
  for (const TestChunk& c : chunks) {
    Placed p{static_cast<int64_t>(file.size()), -1, 0, false};
    for (const TestPage& page : c.pages) {
      if (page.type != 2 && p.data_page < 0) p.data_page = static_cast<int64_t>(file.size());
      if (page.type == 2) p.dict = true;
      file += PageHeaderBytes(page);
      file += page.body;
    }
    if (p.data_page < 0) p.data_page = p.start;
    p.size = static_cast<int64_t>(file.size()) - p.start;
    placed.push_back(p);
  }
  int top_level = 0;  // the root's children: elements not inside a group
  {
    int pending = 0;
    for (const TestSchemaElement& e : schema) {
      if (pending == 0)
        ++top_level;
      else
        --pending;
      pending += e.num_children;
    }
  }
  ThriftWriter w;
  w.BeginStruct();
  w.I32(1, 1);
  w.List(2, ThriftWriter::kStruct, schema.size() + 1);
  w.BeginStruct();  // the root
  w.Binary(4, "schema");
  w.I32(5, top_level);
  w.EndStruct();
  for (const TestSchemaElement& e : schema) {
    w.BeginStruct();
    if (e.type >= 0) w.I32(1, e.type);
    if (e.type_length > 0) w.I32(2, e.type_length);
    w.I32(3, e.repetition);
    w.Binary(4, e.name);
    if (e.num_children > 0) w.I32(5, e.num_children);
    if (e.converted_type >= 0) w.I32(6, e.converted_type);
    w.EndStruct();
  }
  w.I64(3, num_rows);
  w.List(4, ThriftWriter::kStruct, 1);
  w.BeginStruct();  // the row group
  w.List(1, ThriftWriter::kStruct, chunks.size());
  for (size_t i = 0; i < chunks.size(); ++i) {
    const TestChunk& c = chunks[i];
    w.BeginStruct();  // ColumnChunk
    w.I64(2, placed[i].start);
    w.Struct(3);  // ColumnMetaData
    w.I32(1, c.type);
    w.List(2, ThriftWriter::kI32, 1);
    w.RawI32(0);
    std::vector<std::string> path;
    size_t begin = 0;
    while (true) {
      const size_t dot = c.path.find('.', begin);
      path.push_back(c.path.substr(begin, dot - begin));
      if (dot == std::string::npos) break;
      begin = dot + 1;
    }
    w.List(3, ThriftWriter::kBinary, path.size());
    for (const std::string& p : path) w.RawBinary(p);
    w.I32(4, c.codec);
    w.I64(5, c.num_values);
    w.I64(6, placed[i].size);
    w.I64(7, placed[i].size);
    w.I64(9, placed[i].data_page);
    if (placed[i].dict) w.I64(11, placed[i].start);
    w.EndStruct();
    w.EndStruct();
  }
  w.I64(2, 0);
  w.I64(3, num_rows);
  w.EndStruct();
  w.EndStruct();
  file += w.bytes();
  file += Le32(static_cast<uint32_t>(w.bytes().size()));
  file += "PAR1";
  return file;
}

}  // namespace pstrain::parquet::testing
