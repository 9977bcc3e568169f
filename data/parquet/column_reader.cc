#include "data/parquet/column_reader.h"

#include <zlib.h>

#include <algorithm>
#include <cstring>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/status.h"
#include "data/parquet/bit_util.h"
#include "data/parquet/page_header.h"
#include "data/parquet/rle_decoder.h"

namespace pstrain::parquet {
namespace {

// Slot offsets are 32-bit.
constexpr int64_t kMaxSlots = int64_t{UINT32_MAX} - 1;

bool IsUnsigned32(const ColumnDescriptor& c) {
  return c.type == PhysicalType::kInt32 && c.logical == LogicalKind::kInt && !c.int_signed;
}

bool IsBytes(const ColumnDescriptor& c) {
  return c.type == PhysicalType::kByteArray || c.type == PhysicalType::kFixedLenByteArray;
}

bool IsDictionaryEncoding(int32_t encoding) {
  return encoding == static_cast<int32_t>(Encoding::kPlainDictionary) ||
         encoding == static_cast<int32_t>(Encoding::kRleDictionary);
}

// The `nonnull` values appended densely to `*v` after slot_begin, moved to
// their slots [slot_begin, slot_end) (from the last, so that nothing is
// overwritten before it is moved); null slots get `null_value`.
template <typename T>
void SpreadDense(const uint8_t* valid, int64_t slot_begin, int64_t slot_end, int64_t nonnull,
                 T null_value, PodVector<T>* v) {
  v->resize(static_cast<size_t>(slot_end));
  if (nonnull == slot_end - slot_begin) return;
  T* p = v->data();
  // k counts down over the valid slots; p[k] is always inside (k < slot_end
  // once a slot is null), so it is loaded before the choice.
  int64_t k = slot_begin + nonnull;
  for (int64_t i = slot_end; i-- > slot_begin;) {
    const bool is_valid = valid[i] != 0;
    k -= is_valid;
    const T value = p[k];
    p[i] = is_valid ? value : null_value;
  }
}

class ChunkReader {
 public:
  ChunkReader(const ChunkInfo& info, std::string_view bytes, const ReadOptions& options,
              ColumnData* out)
      : info_(info),
        col_(*info.column),
        bytes_(bytes),
        options_(options),
        out_(out),
        scratch_(*out->scratch) {}

  absl::Status Run();

 private:
  // `st` with the file, row group, column and (when one is being read) page
  // in front.
  absl::Status Fail(const absl::Status& st) const;
  absl::Status ResetOutput();
  void ReserveSlots();
  absl::Status ReadPage(const PageHeader& h, std::string_view body);
  absl::Status ReadDictionaryPage(const PageHeader& h, std::string_view body);
  absl::Status ReadDataPageV1(const PageHeader& h, std::string_view body);
  absl::Status ReadDataPageV2(const PageHeader& h, std::string_view body);
  absl::Status CheckPageValues(int64_t n) const;
  // The page body `in` decompressed to `size` bytes (in itself when the
  // chunk is uncompressed).
  absl::StatusOr<std::string_view> Uncompress(std::string_view in, int64_t size);
  absl::Status DecodeLevels(std::string_view data, int max_level, int64_t n,
                            PodVector<uint8_t>* out, const char* what) const;
  // v1 levels: a 4-byte length, then the hybrid; advances *pos.
  absl::Status DecodeV1Levels(std::string_view page, size_t* pos, int32_t encoding, int max_level,
                              int64_t n, PodVector<uint8_t>* out, const char* what) const;
  // The page's levels (in scratch_) become rows and slots, then `values`
  // (in `encoding`) fill the slots.
  absl::Status AddPage(int64_t n, int32_t encoding, std::string_view values);
  absl::Status AddLevels(int64_t n, int64_t* nonnull);
  void SpreadValues(int64_t slot_begin, int64_t nonnull);
  // Leaves the dictionary form: the slots read so far become byte strings.
  absl::Status MaterializeStrings();
  // The slots hold dictionary indices (ReadOptions::keep_dictionary) as long
  // as every data page is dictionary-encoded.
  bool as_indices_ = false;

  const ChunkInfo& info_;
  const ColumnDescriptor& col_;
  std::string_view bytes_;
  const ReadOptions& options_;
  ColumnData* out_;
  internal::ColumnScratch& scratch_;

  int page_index_ = -1;  // the page being read; -1: none yet
  size_t page_offset_ = 0;
  int64_t values_seen_ = 0;  // level entries of the data pages read
  int data_pages_ = 0;
};

absl::Status ChunkReader::Fail(const absl::Status& st) const {
  std::string context = absl::StrCat(std::string(info_.file_name), ": row group ", info_.row_group,
                                     ", column \"", col_.name, "\"");
  if (page_index_ >= 0) {
    absl::StrAppend(&context, ", page ", page_index_, " at byte ",
                    info_.file_offset + page_offset_);
  }
  return Annotate(st, context);
}

absl::Status ChunkReader::ResetOutput() {
  out_->num_rows = 0;
  out_->num_values = 0;
  out_->row_valid.clear();
  out_->list_offsets.clear();
  out_->value_valid.clear();
  out_->ints.clear();
  out_->doubles.clear();
  out_->str_offsets.assign(1, 0);
  out_->arena.clear();
  out_->dictionary_encoded = false;
  out_->dict_index.clear();
  out_->dict_offsets.clear();
  out_->dict_arena.clear();
  scratch_.dictionary.Clear();
  as_indices_ = options_.keep_dictionary && IsBytes(col_);
  if (info_.num_values < 0 || info_.num_values > options_.max_chunk_values ||
      info_.num_values > kMaxSlots) {
    return absl::ResourceExhaustedError(
        absl::StrCat("column chunk of ", info_.num_values, " values (the limit is ",
                     std::min(options_.max_chunk_values, kMaxSlots), ")"));
  }
  // A flat column has one value per row, a list at least one level entry per row.
  if (col_.is_list ? info_.num_values < info_.row_group_rows
                   : info_.num_values != info_.row_group_rows) {
    return absl::DataLossError(absl::StrCat("column chunk has ", info_.num_values,
                                            " values, its row group ", info_.row_group_rows,
                                            " rows"));
  }
  ReserveSlots();
  return absl::OkStatus();
}

// Room for the chunk's slots at once instead of grown page by page (a
// reused ColumnData already has it). The count is the metadata's, so at most
// 8 slots a byte of the chunk (and 64 Ki): a chunk cannot make the reader
// reserve much more than its own size, whatever it claims.
void ChunkReader::ReserveSlots() {
  const int64_t bound =
      std::max<int64_t>(int64_t{1} << 16, 8 * static_cast<int64_t>(bytes_.size()));
  const size_t slots = static_cast<size_t>(std::min(info_.num_values, bound));
  const size_t rows = static_cast<size_t>(std::min(info_.row_group_rows, bound));
  out_->row_valid.reserve(rows);
  if (col_.is_list) {
    out_->list_offsets.reserve(rows + 1);
    out_->value_valid.reserve(slots);
  }
  switch (col_.type) {
    case PhysicalType::kFloat:
    case PhysicalType::kDouble: out_->doubles.reserve(slots); break;
    case PhysicalType::kByteArray:
    case PhysicalType::kFixedLenByteArray:
      if (as_indices_) {
        out_->dict_index.reserve(slots);
      } else {
        out_->str_offsets.reserve(slots + 1);
      }
      break;
    default: out_->ints.reserve(slots); break;
  }
}

absl::Status ChunkReader::Run() {
  if (absl::Status st = ResetOutput(); !st.ok()) return Fail(st);
  size_t pos = 0;
  while (values_seen_ < info_.num_values) {
    ++page_index_;
    page_offset_ = pos;
    if (pos >= bytes_.size()) {
      --page_index_;
      return Fail(absl::DataLossError(absl::StrCat("column chunk ends after ", values_seen_,
                                                   " of its ", info_.num_values, " values")));
    }
    PageHeader h;
    size_t header_size = 0;
    if (absl::Status st = DecodePageHeader(bytes_.substr(pos), &h, &header_size); !st.ok()) {
      return Fail(st);
    }
    pos += header_size;
    if (h.compressed_page_size < 0 ||
        static_cast<uint64_t>(h.compressed_page_size) > bytes_.size() - pos) {
      return Fail(absl::DataLossError(absl::StrCat("page of ", h.compressed_page_size,
                                                   " bytes; the column chunk has ",
                                                   bytes_.size() - pos, " left")));
    }
    if (h.uncompressed_page_size < 0 || h.uncompressed_page_size > options_.max_page_bytes) {
      return Fail(absl::ResourceExhaustedError(absl::StrCat("page of ", h.uncompressed_page_size,
                                                            " uncompressed bytes (the limit is ",
                                                            options_.max_page_bytes, ")")));
    }
    const std::string_view body = bytes_.substr(pos, h.compressed_page_size);
    pos += h.compressed_page_size;
    if (h.has_crc && options_.verify_checksums) {
      const uint32_t crc = static_cast<uint32_t>(
          crc32(0, reinterpret_cast<const Bytef*>(body.data()), static_cast<uInt>(body.size())));
      if (crc != h.crc) {
        return Fail(absl::DataLossError(absl::StrFormat(
            "page checksum mismatch: crc32 of the page is %08x, its header says %08x", crc,
            h.crc)));
      }
    }
    if (absl::Status st = ReadPage(h, body); !st.ok()) return Fail(st);
  }
  page_index_ = -1;
  if (out_->num_rows != info_.row_group_rows) {
    return Fail(absl::DataLossError(absl::StrCat("column chunk holds ", out_->num_rows,
                                                 " rows, its row group ", info_.row_group_rows)));
  }
  if (col_.is_list) {
    out_->list_offsets.push_back(static_cast<uint32_t>(out_->num_values));
  } else {
    out_->num_values = out_->num_rows;
  }
  if (as_indices_) {
    // The dictionary moves to the output (swapped: both keep their
    // capacity), then the null slots' empty entry.
    out_->dictionary_encoded = true;
    out_->str_offsets.clear();
    out_->dict_offsets.swap(scratch_.dictionary.offsets);
    out_->dict_arena.swap(scratch_.dictionary.arena);
    out_->dict_offsets.push_back(out_->dict_offsets.back());
  }
  return absl::OkStatus();
}

absl::Status ChunkReader::ReadPage(const PageHeader& h, std::string_view body) {
  switch (static_cast<PageType>(h.type)) {
    case PageType::kDictionaryPage:
      if (!h.has_dictionary_page) return absl::DataLossError("dictionary page without its header");
      return ReadDictionaryPage(h, body);
    case PageType::kDataPage:
      if (!h.has_data_page) return absl::DataLossError("data page without its header");
      return ReadDataPageV1(h, body);
    case PageType::kDataPageV2:
      if (!h.has_data_page_v2) return absl::DataLossError("data page v2 without its header");
      return ReadDataPageV2(h, body);
    default: return absl::OkStatus();  // an index page, or a page type of a later format: skipped
  }
}

absl::StatusOr<std::string_view> ChunkReader::Uncompress(std::string_view in, int64_t size) {
  if (info_.codec == static_cast<int32_t>(Codec::kUncompressed)) return in;
  if (size < 0 || size > options_.max_page_bytes) {
    return absl::ResourceExhaustedError(absl::StrCat("page of ", size, " uncompressed bytes"));
  }
  if (scratch_.page_capacity < static_cast<size_t>(size)) {
    scratch_.page.reset(new char[size]);
    scratch_.page_capacity = static_cast<size_t>(size);
  }
  PS_RETURN_IF_ERROR(Decompress(info_.codec, in, scratch_.page.get(), static_cast<size_t>(size),
                                &scratch_.codecs));
  return std::string_view(scratch_.page.get(), static_cast<size_t>(size));
}

absl::Status ChunkReader::ReadDictionaryPage(const PageHeader& h, std::string_view body) {
  if (scratch_.dictionary.present || data_pages_ > 0) {
    return absl::DataLossError("a dictionary page after the first page of the column chunk");
  }
  const DictionaryPageHeader& d = h.dictionary_page;
  if (d.encoding != static_cast<int32_t>(Encoding::kPlain) &&
      d.encoding != static_cast<int32_t>(Encoding::kPlainDictionary)) {
    return absl::UnimplementedError(
        absl::StrCat("dictionary page in ", EncodingName(d.encoding), " is not supported"));
  }
  if (col_.type == PhysicalType::kBoolean) {
    return absl::DataLossError("dictionary page in a BOOLEAN column");
  }
  if (d.num_values < 0) {
    return absl::DataLossError(absl::StrCat("dictionary of ", d.num_values, " values"));
  }
  PS_ASSIGN_OR_RETURN(std::string_view page, Uncompress(body, h.uncompressed_page_size));
  Dictionary& dict = scratch_.dictionary;
  // PLAIN checks the count against the page's bytes before reading.
  PS_RETURN_IF_ERROR(DecodeValues(static_cast<int32_t>(Encoding::kPlain),
                                  ValueType{col_.type, col_.type_length}, page, d.num_values,
                                  nullptr, options_.max_page_bytes, dict.sink()));
  if (IsUnsigned32(col_)) {
    for (int64_t& v : dict.ints) v &= 0xffffffff;
  }
  dict.size = d.num_values;
  dict.present = true;
  return absl::OkStatus();
}

absl::Status ChunkReader::CheckPageValues(int64_t n) const {
  if (n < 0 || n > info_.num_values - values_seen_) {
    return absl::DataLossError(absl::StrCat("page of ", n, " values; the column chunk has ",
                                            info_.num_values - values_seen_, " more"));
  }
  if (n > options_.max_page_values) {
    return absl::ResourceExhaustedError(
        absl::StrCat("page of ", n, " values (the limit is ", options_.max_page_values, ")"));
  }
  return absl::OkStatus();
}

absl::Status ChunkReader::DecodeLevels(std::string_view data, int max_level, int64_t n,
                                       PodVector<uint8_t>* out, const char* what) const {
  out->resize(static_cast<size_t>(n));
  RleBitPackedDecoder rle(reinterpret_cast<const uint8_t*>(data.data()), data.size(),
                          BitWidth(static_cast<uint64_t>(max_level)));
  absl::Status st = rle.Get(out->data(), n);
  if (!st.ok()) return Annotate(st, what);
  // The maximum in one pass (vectorised), the error path only above it.
  uint8_t most = 0;
  for (uint8_t level : *out) most = std::max(most, level);
  if (most <= max_level) return absl::OkStatus();
  for (uint8_t level : *out) {
    if (level > max_level) {
      return absl::DataLossError(
          absl::StrCat(what, " ", int{level}, " above the maximum ", max_level));
    }
  }
  return absl::OkStatus();
}

absl::Status ChunkReader::DecodeV1Levels(std::string_view page, size_t* pos, int32_t encoding,
                                         int max_level, int64_t n, PodVector<uint8_t>* out,
                                         const char* what) const {
  if (encoding != static_cast<int32_t>(Encoding::kRle)) {
    return absl::UnimplementedError(
        absl::StrCat(what, "s in ", EncodingName(encoding), " are not supported"));
  }
  if (page.size() - *pos < 4) return absl::DataLossError(absl::StrCat(what, "s are truncated"));
  const uint32_t len = LoadLE<uint32_t>(reinterpret_cast<const uint8_t*>(page.data()) + *pos);
  *pos += 4;
  if (len > page.size() - *pos) {
    return absl::DataLossError(
        absl::StrCat(what, "s of ", len, " bytes in a page of ", page.size()));
  }
  PS_RETURN_IF_ERROR(DecodeLevels(page.substr(*pos, len), max_level, n, out, what));
  *pos += len;
  return absl::OkStatus();
}

absl::Status ChunkReader::ReadDataPageV1(const PageHeader& h, std::string_view body) {
  const DataPageHeader& d = h.data_page;
  PS_RETURN_IF_ERROR(CheckPageValues(d.num_values));
  PS_ASSIGN_OR_RETURN(std::string_view page, Uncompress(body, h.uncompressed_page_size));
  size_t pos = 0;
  if (col_.max_rep > 0) {
    PS_RETURN_IF_ERROR(DecodeV1Levels(page, &pos, d.repetition_level_encoding, col_.max_rep,
                                      d.num_values, &scratch_.rep_levels, "repetition level"));
  }
  if (col_.max_def > 0) {
    PS_RETURN_IF_ERROR(DecodeV1Levels(page, &pos, d.definition_level_encoding, col_.max_def,
                                      d.num_values, &scratch_.def_levels, "definition level"));
  }
  return AddPage(d.num_values, d.encoding, page.substr(pos));
}

absl::Status ChunkReader::ReadDataPageV2(const PageHeader& h, std::string_view body) {
  const DataPageHeaderV2& d = h.data_page_v2;
  PS_RETURN_IF_ERROR(CheckPageValues(d.num_values));
  const int64_t rep_len = d.repetition_levels_byte_length;
  const int64_t def_len = d.definition_levels_byte_length;
  if (rep_len < 0 || def_len < 0 || static_cast<uint64_t>(rep_len + def_len) > body.size()) {
    return absl::DataLossError(
        absl::StrCat("levels of ", rep_len, " + ", def_len, " bytes in a page of ", body.size()));
  }
  if (col_.max_rep > 0) {
    PS_RETURN_IF_ERROR(DecodeLevels(body.substr(0, rep_len), col_.max_rep, d.num_values,
                                    &scratch_.rep_levels, "repetition level"));
  }
  if (col_.max_def > 0) {
    PS_RETURN_IF_ERROR(DecodeLevels(body.substr(rep_len, def_len), col_.max_def, d.num_values,
                                    &scratch_.def_levels, "definition level"));
  }
  std::string_view values = body.substr(rep_len + def_len);
  if (d.is_compressed) {
    const int64_t size = int64_t{h.uncompressed_page_size} - rep_len - def_len;
    if (size < 0) {
      return absl::DataLossError(absl::StrCat("page of ", h.uncompressed_page_size,
                                              " uncompressed bytes has levels of ",
                                              rep_len + def_len));
    }
    PS_ASSIGN_OR_RETURN(values, Uncompress(values, size));
  }
  return AddPage(d.num_values, d.encoding, values);
}

absl::Status ChunkReader::AddPage(int64_t n, int32_t encoding, std::string_view values) {
  ++data_pages_;
  if (as_indices_ && !(IsDictionaryEncoding(encoding) && scratch_.dictionary.present)) {
    PS_RETURN_IF_ERROR(MaterializeStrings());
  }
  const int64_t slot_begin = col_.is_list ? out_->num_values : out_->num_rows;
  int64_t nonnull = 0;
  PS_RETURN_IF_ERROR(AddLevels(n, &nonnull));
  values_seen_ += n;
  if (as_indices_) {
    const Dictionary& dict = scratch_.dictionary;
    if (nonnull > 0) {
      PS_RETURN_IF_ERROR(DecodeDictionaryIndices(values, nonnull, dict.size, &out_->dict_index));
    }
    const uint8_t* valid = col_.is_list ? out_->value_valid.data() : out_->row_valid.data();
    // A dictionary has fewer than 2^31 entries, each at least a byte of one
    // page (a page's size is an int32), so the null index fits.
    SpreadDense(valid, slot_begin, col_.is_list ? out_->num_values : out_->num_rows, nonnull,
                static_cast<uint32_t>(dict.size), &out_->dict_index);
    return absl::OkStatus();
  }
  const ValueType type{col_.type, col_.type_length};
  ValueSink sink{&out_->ints, &out_->doubles, &out_->str_offsets, &out_->arena};
  const size_t ints_before = out_->ints.size();
  if (nonnull > 0) {
    // Byte strings: at most max_page_bytes more, max_chunk_string_bytes in all.
    const uint64_t arena_limit = std::min<uint64_t>(out_->arena.size() + options_.max_page_bytes,
                                                    options_.max_chunk_string_bytes);
    PS_RETURN_IF_ERROR(
        DecodeValues(encoding, type, values, nonnull, &scratch_.dictionary, arena_limit, sink));
  }
  if (IsUnsigned32(col_)) {
    for (size_t i = ints_before; i < out_->ints.size(); ++i) out_->ints[i] &= 0xffffffff;
  }
  SpreadValues(slot_begin, nonnull);
  return absl::OkStatus();
}

absl::Status ChunkReader::AddLevels(int64_t n, int64_t* nonnull) {
  const uint8_t* def = scratch_.def_levels.data();
  const int max_def = col_.max_def;
  if (!col_.is_list) {
    if (n > info_.row_group_rows - out_->num_rows) {
      return absl::DataLossError("the column chunk has more rows than its row group");
    }
    const size_t base = out_->row_valid.size();
    out_->row_valid.resize(base + n);
    uint8_t* valid = out_->row_valid.data() + base;
    int64_t count = n;
    if (max_def == 0) {
      std::fill(valid, valid + n, 1);
    } else {
      count = 0;
      for (int64_t i = 0; i < n; ++i) {
        valid[i] = def[i] == max_def;
        count += valid[i];
      }
    }
    out_->num_rows += n;
    *nonnull = count;
    return absl::OkStatus();
  }
  const uint8_t* rep = scratch_.rep_levels.data();
  int64_t count = 0;
  for (int64_t i = 0; i < n; ++i) {
    const int d = def[i];
    if (rep[i] == 0) {  // a new row
      if (out_->num_rows >= info_.row_group_rows) {
        return absl::DataLossError("the column chunk has more rows than its row group");
      }
      out_->list_offsets.push_back(static_cast<uint32_t>(out_->num_values));
      out_->row_valid.push_back(d >= col_.list_def);
      ++out_->num_rows;
      if (d < col_.element_def) continue;  // a null or empty list
    } else if (out_->num_rows == 0 || d < col_.element_def) {
      return absl::DataLossError(
          absl::StrCat("repetition level ", int{rep[i]}, " with definition level ", d,
                       out_->num_rows == 0 ? " at the start of the column chunk" : ""));
    }
    out_->value_valid.push_back(d == max_def);
    count += d == max_def;
    ++out_->num_values;
  }
  *nonnull = count;
  return absl::OkStatus();
}

// The page's `nonnull` values were appended densely after slot_begin; move
// them to their slots and give null slots 0 or an empty string.
void ChunkReader::SpreadValues(int64_t slot_begin, int64_t nonnull) {
  const int64_t slot_end = col_.is_list ? out_->num_values : out_->num_rows;
  const int64_t slots = slot_end - slot_begin;
  const uint8_t* valid = (col_.is_list ? out_->value_valid.data() : out_->row_valid.data());
  switch (col_.type) {
    case PhysicalType::kFloat:
    case PhysicalType::kDouble:
      SpreadDense(valid, slot_begin, slot_end, nonnull, 0.0, &out_->doubles);
      break;
    case PhysicalType::kByteArray:
    case PhysicalType::kFixedLenByteArray: {
      // offsets[i + 1] is the end of slot i.
      PodVector<uint32_t>& o = out_->str_offsets;
      o.resize(slot_end + 1);
      if (nonnull == slots) break;
      int64_t k = slot_begin + nonnull;
      for (int64_t i = slot_end; i-- > slot_begin;) {
        o[i + 1] = o[k];
        k -= valid[i] != 0;
      }
      break;
    }
    default:
      SpreadDense(valid, slot_begin, slot_end, nonnull, int64_t{0}, &out_->ints);
      break;
  }
}

absl::Status ChunkReader::MaterializeStrings() {
  as_indices_ = false;
  const Dictionary& dict = scratch_.dictionary;
  const PodVector<uint32_t>& index = out_->dict_index;
  // Entry dict.size, the null slots', is empty.
  const auto length = [&](uint32_t k) -> uint64_t {
    return k < dict.size ? dict.offsets[k + 1] - dict.offsets[k] : 0;
  };
  uint64_t total = 0;
  for (uint32_t k : index) total += length(k);
  const uint64_t limit = std::min<uint64_t>(options_.max_chunk_string_bytes, UINT32_MAX);
  if (total > limit) {
    return absl::ResourceExhaustedError(
        absl::StrCat("byte strings pass the limit of ", limit, " decoded bytes"));
  }
  std::string& arena = out_->arena;
  PodVector<uint32_t>& offsets = out_->str_offsets;
  arena.resize(static_cast<size_t>(total));
  offsets.resize(index.size() + 1);
  uint32_t end = 0;
  for (size_t i = 0; i < index.size(); ++i) {
    const uint64_t len = length(index[i]);
    if (len > 0) std::memcpy(&arena[end], dict.arena.data() + dict.offsets[index[i]], len);
    end += static_cast<uint32_t>(len);
    offsets[i + 1] = end;
  }
  out_->dict_index.clear();
  return absl::OkStatus();
}

}  // namespace

absl::Status ReadColumnChunk(const ChunkInfo& info, std::string_view bytes,
                             const ReadOptions& options, ColumnData* out) {
  if (out->scratch == nullptr) out->scratch = std::make_unique<internal::ColumnScratch>();
  ChunkReader reader(info, bytes, options, out);
  return reader.Run();
}

}  // namespace pstrain::parquet
