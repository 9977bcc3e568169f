#include "data/parquet/page_header.h"

#include "absl/strings/str_cat.h"
#include "data/parquet/thrift_compact.h"

namespace pstrain::parquet {
namespace {

using Type = CompactReader::Type;
using Field = CompactReader::Field;

bool EnterStruct(CompactReader& r, Type type) {
  if (type != Type::kStruct) {
    r.Fail(absl::StrCat("expected a thrift struct, found type ", static_cast<int>(type)));
    return false;
  }
  r.BeginStruct();
  return r.ok();
}

// Fields 1..n of the struct must all be present: `seen` has bit i for field
// i.
void RequireFields(CompactReader& r, unsigned seen, int n, const char* what) {
  const unsigned required = ((1u << n) - 1) << 1;
  if (r.ok() && (seen & required) != required) {
    r.Fail(absl::StrCat(what, " without a required field"));
  }
}

void DecodeDataPage(CompactReader& r, Type type, DataPageHeader* h) {
  if (!EnterStruct(r, type)) return;
  unsigned seen = 0;
  Field f;
  while (r.NextField(&f)) {
    switch (f.id) {
      case 1: h->num_values = r.ReadI32(f.type); break;
      case 2: h->encoding = r.ReadI32(f.type); break;
      case 3: h->definition_level_encoding = r.ReadI32(f.type); break;
      case 4: h->repetition_level_encoding = r.ReadI32(f.type); break;
      default: r.Skip(f.type); continue;
    }
    seen |= 1u << f.id;
  }
  RequireFields(r, seen, 4, "data page header");
}

void DecodeDataPageV2(CompactReader& r, Type type, DataPageHeaderV2* h) {
  if (!EnterStruct(r, type)) return;
  unsigned seen = 0;
  Field f;
  while (r.NextField(&f)) {
    switch (f.id) {
      case 1: h->num_values = r.ReadI32(f.type); break;
      case 2: h->num_nulls = r.ReadI32(f.type); break;
      case 3: h->num_rows = r.ReadI32(f.type); break;
      case 4: h->encoding = r.ReadI32(f.type); break;
      case 5: h->definition_levels_byte_length = r.ReadI32(f.type); break;
      case 6: h->repetition_levels_byte_length = r.ReadI32(f.type); break;
      case 7: h->is_compressed = r.ReadBool(f.type); break;
      default: r.Skip(f.type); continue;
    }
    seen |= 1u << f.id;
  }
  RequireFields(r, seen, 6, "data page v2 header");
}

void DecodeDictionaryPage(CompactReader& r, Type type, DictionaryPageHeader* h) {
  if (!EnterStruct(r, type)) return;
  unsigned seen = 0;
  Field f;
  while (r.NextField(&f)) {
    switch (f.id) {
      case 1: h->num_values = r.ReadI32(f.type); break;
      case 2: h->encoding = r.ReadI32(f.type); break;
      default: r.Skip(f.type); continue;
    }
    seen |= 1u << f.id;
  }
  RequireFields(r, seen, 2, "dictionary page header");
}

}  // namespace

absl::Status DecodePageHeader(std::string_view bytes, PageHeader* header, size_t* header_size) {
  *header = PageHeader{};
  CompactReader r(bytes);
  unsigned seen = 0;
  r.BeginStruct();
  Field f;
  while (r.NextField(&f)) {
    switch (f.id) {
      case 1: header->type = r.ReadI32(f.type); break;
      case 2: header->uncompressed_page_size = r.ReadI32(f.type); break;
      case 3: header->compressed_page_size = r.ReadI32(f.type); break;
      case 4:
        header->crc = static_cast<uint32_t>(r.ReadI32(f.type));
        header->has_crc = true;
        break;
      case 5:
        DecodeDataPage(r, f.type, &header->data_page);
        header->has_data_page = true;
        break;
      case 7:
        DecodeDictionaryPage(r, f.type, &header->dictionary_page);
        header->has_dictionary_page = true;
        break;
      case 8:
        DecodeDataPageV2(r, f.type, &header->data_page_v2);
        header->has_data_page_v2 = true;
        break;
      default: r.Skip(f.type); continue;
    }
    seen |= 1u << f.id;
  }
  RequireFields(r, seen, 3, "page header");
  if (!r.ok()) {
    return absl::DataLossError(absl::StrCat("corrupt page header: ", r.status().message()));
  }
  *header_size = r.position();
  return absl::OkStatus();
}

}  // namespace pstrain::parquet
