// libFuzzer target: bytes -> lines -> the Criteo/TSV parser, with the
// default schema and with multi-hot fields. Must never crash; malformed
// lines are errors.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "worker/data/criteo_parser.h"

using namespace pstrain::worker;

namespace {

const CriteoParser& Parser(bool multi_hot) {
  static const CriteoParser single = *CriteoParser::Create(Schema{});
  static const CriteoParser multi = [] {
    Schema s;
    s.num_dense = 3;
    s.num_sparse = 4;
    s.multi_hot_sep = ',';
    s.hash_buckets = 1000;
    return *CriteoParser::Create(s);
  }();
  return multi_hot ? multi : single;
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
    (void)Parser(false).Parse(line, &row);
    (void)Parser(true).Parse(line, &row);
    start = nl + 1;
  }
  return 0;
}
