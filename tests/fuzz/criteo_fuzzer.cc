// libFuzzer target: bytes -> lines -> the line parser, with the default
// Criteo schema, with multi-hot fields, and with a custom CSV schema (quoted
// columns, decimals, a threshold label, a multi-hot column); and the header
// check. Must never crash; malformed lines are errors.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "data/delimited_parser.h"

using namespace pstrain::worker;

namespace {

const DelimitedParser& CriteoLayoutParser(bool multi_hot) {
  static const DelimitedParser single = *DelimitedParser::Create(Schema{});
  static const DelimitedParser multi = [] {
    Schema s;
    s.num_dense = 3;
    s.num_sparse = 4;
    s.multi_hot_sep = ',';
    s.hash_buckets = 1000;
    return *DelimitedParser::Create(s);
  }();
  return multi_hot ? multi : single;
}

const DelimitedParser& CsvParser() {
  static const DelimitedParser csv = [] {
    Schema s;
    s.custom = true;
    s.field_sep = ',';
    s.header = true;
    s.num_columns = 5;
    s.column_names = {"a", "b", "c", "d", "e"};
    s.label.column = 4;
    s.label.op = LabelColumn::Op::kGt;
    s.label.threshold = 15;
    s.dense.resize(2);
    s.dense[0].column = 0;
    s.dense[0].transform = Transform::kLog1p;
    s.dense[1].column = 2;
    s.dense[1].transform = Transform::kStandardize;
    s.dense[1].mean = 1;
    s.dense[1].stddev = 2;
    s.dense[1].has_stats = true;
    s.sparse.resize(2);
    s.sparse[0].column = 1;
    s.sparse[1].column = 3;
    s.sparse[1].multi_hot_sep = '|';
    s.sparse[1].hash_buckets = 100;
    s.num_dense = 2;
    s.num_sparse = 2;
    return *DelimitedParser::Create(s);
  }();
  return csv;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  ParsedRow row;
  size_t start = 0;
  while (start <= text.size()) {
    size_t nl = text.find('\n', start);
    if (nl == std::string_view::npos) nl = text.size();
    std::string_view line = text.substr(start, nl - start);
    (void)CriteoLayoutParser(false).Parse(line, &row);
    (void)CriteoLayoutParser(true).Parse(line, &row);
    (void)CsvParser().Parse(line, &row);
    (void)CsvParser().CheckHeader(line);
    start = nl + 1;
  }
  return 0;
}
