#include "data/parquet_rows.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <limits>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "common/hash.h"
#include "common/status.h"
#include "data/file_set.h"
#include "data/label_rule.h"
#include "data/parquet_values.h"
#include "data/time_parts.h"

namespace pstrain::worker {
namespace {

constexpr int64_t kBlockRows = 1024;  // converted at a time: its ids stay in the L2 cache
constexpr int64_t kRunRows = 4096;    // AppendRows converts at most this many at a time


using parquet::ColumnDescriptor;
using parquet::LogicalKind;
using parquet::PhysicalType;

// The first byte of row group `rg`: of its earliest column chunk (0 for a
// row group without columns).
uint64_t FirstByte(const parquet::ParquetFile& f, int rg) {
  int64_t first = std::numeric_limits<int64_t>::max();
  for (size_t c = 0; c < f.columns().size(); ++c) {
    first = std::min(first, f.chunk_range(rg, static_cast<int>(c)).offset);
  }
  return first == std::numeric_limits<int64_t>::max() ? 0 : static_cast<uint64_t>(first);
}

}  // namespace

ParquetRows::ParquetRows(const Schema& schema)
    : schema_(schema), missing_(schema.missing_tokens) {
  for (const DenseColumn& d : schema_.dense) missing_value_.push_back(MissingValue(d));
}

ParquetRows::~ParquetRows() = default;

void ParquetRows::Close() {
  file_.reset();
  row_groups_.clear();
  next_group_ = 0;
  group_ = -1;
  group_rows_ = next_row_ = rows_left_after_ = seek_row_ = 0;
  block_.first = block_.size = 0;
  known_first_ = known_end_ = 0;
}

absl::Status ParquetRows::Open(const std::string& path, uint64_t begin, uint64_t end) {
  Close();
  path_ = path;
  // Dictionary-encoded strings as indices: ConvertSparse hashes each
  // dictionary entry once instead of each row's value.
  parquet::ReadOptions options;
  options.keep_dictionary = true;
  PS_ASSIGN_OR_RETURN(file_, parquet::ParquetFile::Open(path, options));
  const parquet::ParquetFile& f = *file_;
  if (!schema_.partition_columns.empty()) {
    PS_ASSIGN_OR_RETURN(partition_values_, PartitionValues(path, schema_.partition_columns));
    partition_desc_.type = PhysicalType::kByteArray;
    partition_desc_.logical = LogicalKind::kString;
    partition_desc_.nullable = true;
  }
  const int file_columns = NumFileColumns(schema_);
  // Bind each role's column by name.
  const auto bind = [&](int column, const char* role, bool list_ok, Bound* b) -> absl::Status {
    const std::string& name = schema_.column_names[static_cast<size_t>(column)];
    b->partition = column >= file_columns ? column - file_columns : -1;
    if (b->partition >= 0) {  // the same value in every row of the file
      b->file_column = -1;
      b->desc = &partition_desc_;
      return absl::OkStatus();
    }
    b->file_column = f.FindColumn(name);
    if (b->file_column < 0) {
      std::string names;
      for (const ColumnDescriptor& c : f.columns()) absl::StrAppend(&names, names.empty() ? "" : ", ", c.name);
      return absl::InvalidArgumentError(absl::StrCat(path, ": no column \"", name, "\" (the ", role,
                                                     "); its columns: ", names));
    }
    const ColumnDescriptor& c = f.columns()[static_cast<size_t>(b->file_column)];
    b->desc = &c;
    if (std::string why = Refusal(c, list_ok); !why.empty()) {
      return absl::InvalidArgumentError(absl::StrCat(path, ": column \"", name, "\" (the ", role,
                                                     ") cannot be read: it is ", why));
    }
    return absl::OkStatus();
  };
  PS_RETURN_IF_ERROR(bind(schema_.label.column, "label", false, &label_));
  extra_.resize(schema_.extra_labels.size());
  for (size_t k = 0; k < extra_.size(); ++k) {
    PS_RETURN_IF_ERROR(bind(schema_.extra_labels[k].column, "label", false, &extra_[k]));
  }
  dense_.resize(schema_.dense.size());
  for (size_t j = 0; j < dense_.size(); ++j) {
    PS_RETURN_IF_ERROR(bind(schema_.dense[j].column, "dense column", false, &dense_[j]));
  }
  sparse_.resize(schema_.sparse.size());
  for (size_t j = 0; j < sparse_.size(); ++j) {
    PS_RETURN_IF_ERROR(bind(schema_.sparse[j].column, "categorical column",
                            schema_.sparse[j].time == TimePart::kNone, &sparse_[j]));
  }
  // The row groups whose first byte this range owns.
  for (int rg = 0; rg < f.num_row_groups(); ++rg) {
    const uint64_t first = FirstByte(f, rg);
    if (first >= begin && first < end && f.row_group_num_rows(rg) > 0) {
      row_groups_.push_back(rg);
      rows_left_after_ += f.row_group_num_rows(rg);
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<uint64_t>> ParquetRows::RowGroupStarts(const std::string& path) {
  PS_ASSIGN_OR_RETURN(std::unique_ptr<parquet::ParquetFile> f, parquet::ParquetFile::Open(path));
  std::vector<uint64_t> starts;
  for (int rg = 0; rg < f->num_row_groups(); ++rg) {
    if (f->row_group_num_rows(rg) > 0) starts.push_back(FirstByte(*f, rg));
  }
  return starts;
}

absl::Status ParquetRows::LoadRowGroup(int rg) {
  const auto load = [&](Bound* b) {
    if (b->partition < 0) return file_->ReadColumn(rg, b->file_column, &b->data);
    FillConstant(partition_values_[static_cast<size_t>(b->partition)],
                 file_->row_group_num_rows(rg), &b->data);
    return absl::OkStatus();
  };
  PS_RETURN_IF_ERROR(load(&label_));
  for (Bound& b : extra_) PS_RETURN_IF_ERROR(load(&b));
  for (Bound& b : dense_) PS_RETURN_IF_ERROR(load(&b));
  for (Bound& b : sparse_) {
    PS_RETURN_IF_ERROR(load(&b));
    b.entry_ids.clear();
  }
  group_ = rg;
  group_rows_ = file_->row_group_num_rows(rg);
  next_row_ = std::exchange(seek_row_, 0);
  block_.first = block_.size = 0;
  known_first_ = known_end_ = 0;
  rows_left_after_ -= group_rows_;
  return absl::OkStatus();
}

int64_t ParquetRows::RowsLeft() const { return group_rows_ - next_row_ + rows_left_after_; }

bool ParquetRows::Position(int32_t* row_group, int64_t* row) const {
  if (group_ >= 0 && next_row_ < group_rows_) {
    *row_group = group_;
    *row = next_row_;
    return true;
  }
  if (next_group_ < row_groups_.size()) {
    *row_group = row_groups_[next_group_];
    *row = seek_row_;
    return true;
  }
  return false;
}

absl::Status ParquetRows::Seek(int32_t row_group, int64_t row) {
  const auto at = std::find(row_groups_.begin() + static_cast<ptrdiff_t>(next_group_),
                            row_groups_.end(), row_group);
  if (group_ >= 0 || at == row_groups_.end() || row < 0 ||
      row > file_->row_group_num_rows(row_group)) {
    return absl::InvalidArgumentError(absl::StrCat(
        path_, ": no row ", row, " of row group ", row_group, " in this reader's part of the file"));
  }
  for (auto g = row_groups_.begin() + static_cast<ptrdiff_t>(next_group_); g != at; ++g) {
    rows_left_after_ -= file_->row_group_num_rows(*g);
  }
  next_group_ = static_cast<size_t>(at - row_groups_.begin());
  seek_row_ = row;
  return absl::OkStatus();
}

std::string ParquetRows::Where() const {
  return absl::StrCat(path_, ": row group ", group_, ", row ", next_row_);
}

bool ParquetRows::Number(const Bound& b, int64_t i, double* v) const {
  return SlotNumber(b.data, *b.desc, missing_, i, v);
}

std::string_view ParquetRows::Token(const Bound& b, int64_t i, std::string* scratch) const {
  return SlotToken(b.data, *b.desc, i, scratch);
}

bool ParquetRows::Seconds(const Bound& b, int64_t i, int64_t* seconds) const {
  return SlotSeconds(b.data, *b.desc, i, seconds);
}

bool ParquetRows::Sparse(int f, int64_t r, std::vector<uint64_t>* ids) {
  const SparseColumn& c = schema_.sparse[static_cast<size_t>(f)];
  const Bound& b = sparse_[static_cast<size_t>(f)];
  const int field = HashField(c, f);
  const size_t before = ids->size();
  if (c.time != TimePart::kNone) {
    int64_t seconds;
    if (Seconds(b, r, &seconds)) {
      char buf[8];
      const auto end = std::to_chars(buf, buf + sizeof(buf), TimePartOf(seconds, c.time)).ptr;
      ids->push_back(FeatureId(field, std::string_view(buf, end - buf), c.hash_buckets));
    } else if (b.data.valid(r) && !missing_.Contains(Token(b, r, &token_))) {
      return false;
    } else {
      ids->push_back(MissingId(field, c.hash_buckets));
    }
    return true;
  }
  const auto add = [&](int64_t slot) {
    const std::string_view t = Token(b, slot, &token_);
    if (!missing_.Contains(t)) ids->push_back(FeatureId(field, t, c.hash_buckets));
  };
  if (b.data.list_offsets.empty() && c.multi_hot_sep != 0) {
    // A string of a multi_hot column ("a|b"): split as its text would be.
    const std::string_view t = Token(b, r, &token_);
    for (size_t p = 0; p < t.size();) {
      const size_t e = std::min(t.find(c.multi_hot_sep, p), t.size());
      const std::string_view one = t.substr(p, e - p);
      if (!missing_.Contains(one)) ids->push_back(FeatureId(field, one, c.hash_buckets));
      p = e + 1;
    }
  } else if (b.data.list_offsets.empty()) {
    add(r);
  } else if (b.data.row_valid[static_cast<size_t>(r)]) {
    for (uint32_t s = b.data.list_offsets[static_cast<size_t>(r)];
         s < b.data.list_offsets[static_cast<size_t>(r) + 1]; ++s) {
      add(s);
    }
  }
  if (ids->size() == before) ids->push_back(MissingId(field, c.hash_buckets));
  if (c.max_length > 0 && ids->size() - before > static_cast<size_t>(c.max_length)) {
    // Keep the last max_length ids: the most recent of a history.
    const size_t drop = ids->size() - before - static_cast<size_t>(c.max_length);
    ids->erase(ids->begin() + static_cast<ptrdiff_t>(before),
               ids->begin() + static_cast<ptrdiff_t>(before + drop));
  }
  return true;
}

void ParquetRows::ConvertDense(int j, int64_t r0, int64_t n, float* out, size_t stride,
                               int32_t* bad) {
  const DenseColumn& dc = schema_.dense[static_cast<size_t>(j)];
  const Bound& b = dense_[static_cast<size_t>(j)];
  const parquet::ColumnData& d = b.data;
  const ColumnDescriptor& c = *b.desc;
  const float missing = missing_value_[static_cast<size_t>(j)];
  const int32_t role = 1 + j;
  if (dc.time != TimePart::kNone) {
    for (int64_t i = 0; i < n; ++i) {
      int64_t seconds;
      if (Seconds(b, r0 + i, &seconds)) {
        out[static_cast<size_t>(i) * stride] = ApplyTransform(dc, TimePartOf(seconds, dc.time));
      } else if (d.valid(r0 + i) && !missing_.Contains(Token(b, r0 + i, &token_))) {
        MarkBad(bad, i, role);
      } else {
        out[static_cast<size_t>(i) * stride] = missing;
      }
    }
    return;
  }
  // Plain integers under log1p: the Criteo layout's table, the same floats.
  const bool plain_ints = !IsBytes(c) && c.type != PhysicalType::kFloat &&
                          c.type != PhysicalType::kDouble && c.logical != LogicalKind::kDecimal &&
                          !(c.logical == LogicalKind::kInt && !c.int_signed && c.int_bits == 64);
  constexpr double kInf = std::numeric_limits<double>::infinity();
  const bool log1p = dc.clip_lo == -kInf && dc.clip_hi == kInf &&
                     (dc.transform == Transform::kLog1p || dc.transform == Transform::kLog1pClamp);
  if (plain_ints && log1p) {
    const bool clamp = dc.transform == Transform::kLog1pClamp;
    const uint8_t* valid = d.row_valid.data() + r0;
    const int64_t* ints = d.ints.data() + r0;
    const float* table = internal::kLog1pTable.data();
    for (int64_t i = 0; i < n; ++i) {
      // A null slot holds 0: its table entry, then the missing value (a
      // select, not a branch: nulls fall at random).
      const int64_t x = ints[i];
      const float t =
          static_cast<uint64_t>(x) < static_cast<uint64_t>(internal::kLog1pTableSize)
              ? table[x]
          : clamp || x >= 0 ? DenseTransform(x)
          : x == std::numeric_limits<int64_t>::min() ? ApplyTransform(dc, static_cast<double>(x))
                                                     : -DenseTransform(-x);
      out[static_cast<size_t>(i) * stride] = valid[i] != 0 ? t : missing;
    }
    return;
  }
  for (int64_t i = 0; i < n; ++i) {
    const int64_t r = r0 + i;
    double v;
    if (Number(b, r, &v)) {
      out[static_cast<size_t>(i) * stride] = ApplyTransform(dc, v);
    } else if (d.valid(r) && (IsBytes(c) ? !missing_.Contains(d.bytes(r))
                                         : !std::isnan(d.doubles[static_cast<size_t>(r)]))) {
      // Text that is no number, or an infinity: a bad row, as the same text
      // is a bad line (a NaN is missing, as text's "NaN").
      MarkBad(bad, i, role);
    } else {
      out[static_cast<size_t>(i) * stride] = missing;
    }
  }
}

bool ParquetRows::OneIdARow(int f) const {
  const SparseColumn& sc = schema_.sparse[static_cast<size_t>(f)];
  return sc.time == TimePart::kNone && sc.multi_hot_sep == 0 &&
         sparse_[static_cast<size_t>(f)].data.list_offsets.empty();
}

void ParquetRows::ConvertSparseOne(int f, int64_t r0, int64_t n, uint64_t* out, size_t stride) {
  const SparseColumn& sc = schema_.sparse[static_cast<size_t>(f)];
  Bound& b = sparse_[static_cast<size_t>(f)];
  const parquet::ColumnData& d = b.data;
  const ColumnDescriptor& c = *b.desc;
  const int field = HashField(sc, f);
  const uint64_t buckets = sc.hash_buckets;
  const uint64_t missing_id = MissingId(field, buckets);
  if (IsBytes(c) && c.logical != LogicalKind::kDecimal) {
    // Strings: FeatureId with the field's seed computed once.
    const uint64_t seed = FieldSeed(field);
    const auto id_of = [&](std::string_view t) {
      if (missing_.Contains(t)) return missing_id;
      const uint64_t h = HashBytes(t, seed);
      return buckets == 0 ? h : Mix64(h) % buckets;
    };
    if (d.dictionary_encoded) {
      // Each dictionary entry's id once a chunk (the last entry, empty, is
      // a null's: the same id as an empty string's), then a look-up a row.
      if (b.entry_ids.empty()) {
        b.entry_ids.resize(static_cast<size_t>(d.dict_size()) + 1);
        for (int64_t k = 0; k <= d.dict_size(); ++k) {
          b.entry_ids[static_cast<size_t>(k)] = id_of(d.dict_entry(k));
        }
      }
      const uint32_t* index = d.dict_index.data() + r0;
      const uint64_t* entry_ids = b.entry_ids.data();
      if (stride == 1) {
        for (int64_t i = 0; i < n; ++i) out[i] = entry_ids[index[i]];
      } else {
        for (int64_t i = 0; i < n; ++i) out[static_cast<size_t>(i) * stride] = entry_ids[index[i]];
      }
      return;
    }
    for (int64_t i = 0; i < n; ++i) {
      const int64_t r = r0 + i;
      const std::string_view t =
          d.row_valid[static_cast<size_t>(r)] != 0 ? d.bytes(r) : std::string_view();
      out[static_cast<size_t>(i) * stride] = id_of(t);
    }
    return;
  }
  for (int64_t i = 0; i < n; ++i) {
    const std::string_view t = Token(b, r0 + i, &token_);
    out[static_cast<size_t>(i) * stride] =
        missing_.Contains(t) ? missing_id : FeatureId(field, t, buckets);
  }
}

int64_t ParquetRows::ConvertSparseBag(int f, int64_t r0, int64_t n, size_t max_ids,
                                      std::vector<uint64_t>* ids, uint32_t* ends, int32_t* bad) {
  const int32_t role = 1 + schema_.num_dense + f;
  for (int64_t i = 0; i < n; ++i) {
    const size_t before = ids->size();
    if (!Sparse(f, r0 + i, ids)) MarkBad(bad, i, role);
    if (ids->size() > max_ids) {
      ids->resize(before);
      return i;
    }
    ends[i] = static_cast<uint32_t>(ids->size());
  }
  return n;
}

void ParquetRows::ConvertLabels(int64_t r0, int64_t n, float* label, float* extra, int32_t* bad) {
  double v;
  for (int64_t i = 0; i < n; ++i) {
    if (!Number(label_, r0 + i, &v) || !ApplyLabelRule(schema_.label, v, &label[i])) {
      MarkBad(bad, i, 0);
    }
  }
  const size_t k_extra = extra_.size();
  for (size_t k = 0; k < k_extra; ++k) {
    for (int64_t i = 0; i < n; ++i) {
      float y = std::numeric_limits<float>::quiet_NaN();
      if (Number(extra_[k], r0 + i, &v) && !ApplyLabelRule(schema_.extra_labels[k], v, &y)) {
        y = std::numeric_limits<float>::quiet_NaN();
      }
      extra[static_cast<size_t>(i) * k_extra + k] = y;
    }
  }
}

void ParquetRows::ConvertBlock(int64_t first, int64_t size) {
  block_.first = first;
  block_.size = size;
  const size_t n = static_cast<size_t>(size);
  block_.bad.assign(n, -1);
  int32_t* bad = block_.bad.data();
  block_.label.resize(n);
  block_.extra.resize(n * extra_.size());
  ConvertLabels(first, size, block_.label.data(), block_.extra.data(), bad);
  const size_t nd = dense_.size();
  block_.dense.resize(nd * n);
  for (size_t j = 0; j < nd; ++j) {
    ConvertDense(static_cast<int>(j), first, size, block_.dense.data() + j, nd, bad);
  }
  const size_t ns = sparse_.size();
  block_.row_ids.resize(ns * n);
  block_.ids.resize(ns);
  block_.ends.resize(ns);
  block_.one_id_a_row = true;
  for (size_t f = 0; f < ns; ++f) {
    std::vector<uint64_t>& ids = block_.ids[f];
    std::vector<uint32_t>& ends = block_.ends[f];
    ids.clear();
    ends.clear();
    if (OneIdARow(static_cast<int>(f))) {
      ConvertSparseOne(static_cast<int>(f), first, size, block_.row_ids.data() + f, ns);
    } else {
      block_.one_id_a_row = false;
      ends.resize(n);
      ConvertSparseBag(static_cast<int>(f), first, size, kMaxIdsPerField, &ids, ends.data(), bad);
    }
  }
}

std::string ParquetRows::BadReason(int32_t role, int64_t r) {
  if (role == 0) return absl::StrCat("column \"", schema_.label.name, "\": no label");
  const auto not_a_time = [&](const Bound& b, int column) {
    return absl::StrCat("column \"", schema_.column_names[static_cast<size_t>(column)],
                        "\": not a timestamp: \"", std::string(Token(b, r, &token_).substr(0, 40)),
                        "\"");
  };
  if (role <= schema_.num_dense) {
    const size_t j = static_cast<size_t>(role - 1);
    const DenseColumn& dc = schema_.dense[j];
    if (dc.time != TimePart::kNone) return not_a_time(dense_[j], dc.column);
    return absl::StrCat("column \"", dc.name, "\": not a number: \"",
                        std::string(Token(dense_[j], r, &token_).substr(0, 40)), "\"");
  }
  const size_t f = static_cast<size_t>(role - 1 - schema_.num_dense);
  return not_a_time(sparse_[f], schema_.sparse[f].column);
}

absl::StatusOr<bool> ParquetRows::EnsureRows() {
  while (group_ < 0 || next_row_ == group_rows_) {
    if (next_group_ == row_groups_.size()) return false;
    PS_RETURN_IF_ERROR(LoadRowGroup(row_groups_[next_group_++]));
  }
  return true;
}

absl::StatusOr<RowsAppended> ParquetRows::AppendRows(BatchBuilder* builder,
                                                               int64_t max_rows, std::string* bad) {
  bad->clear();
  RowsAppended a;
  PS_ASSIGN_OR_RETURN(bool more, EnsureRows());
  if (!more) {
    a.end = true;
    return a;
  }
  const int64_t r0 = next_row_;
  const bool known = r0 >= known_first_ && r0 < known_end_;
  if (known && known_bad_[static_cast<size_t>(r0 - known_first_)] >= 0) {
    // A row found bad by an earlier call: reported without converting it.
    next_row_ = r0 + 1;
    *bad = BadReason(known_bad_[static_cast<size_t>(r0 - known_first_)], r0);
    return a;
  }
  Batch& b = *builder->batch_for_append();
  const size_t base = static_cast<size_t>(b.size);
  int64_t n = std::min({max_rows, group_rows_ - r0, kRunRows,
                        static_cast<int64_t>(kMaxBatchRows - b.size)});
  const size_t ns = sparse_.size();
  for (size_t f = 0; f < ns; ++f) {
    if (OneIdARow(static_cast<int>(f))) {
      n = std::min(n, static_cast<int64_t>(kMaxIdsPerField - b.ids[f].size()));
    }
  }
  if (known) {
    // Up to the next row known bad: these rows are good.
    const int64_t stop = std::min(r0 + n, known_end_);
    for (int64_t r = r0; r < stop; ++r) {
      if (known_bad_[static_cast<size_t>(r - known_first_)] >= 0) {
        n = r - r0;
        break;
      }
    }
  }
  if (n <= 0) return a;  // the batch is full
  // Column by column into the batch's arrays, rows [base, base + n).
  const size_t un = static_cast<size_t>(n);
  run_bad_.assign(un, -1);
  int32_t* run_bad = run_bad_.data();
  const size_t ne = extra_.size(), nd = dense_.size();
  b.labels.resize(base + un);
  b.extra_labels.resize((base + un) * ne);
  ConvertLabels(r0, n, b.labels.data() + base, b.extra_labels.data() + base * ne, run_bad);
  b.dense.resize((base + un) * nd);
  float* dense = b.dense.data() + base * nd;
  for (size_t j = 0; j < nd; ++j) ConvertDense(static_cast<int>(j), r0, n, dense + j, nd, run_bad);
  int64_t fit = n;  // rows within the batch's limits
  for (size_t f = 0; f < ns; ++f) {
    std::vector<uint64_t>& ids = b.ids[f];
    std::vector<uint32_t>& offsets = b.offsets[f];
    offsets.resize(base + 1 + un);
    uint32_t* ends = offsets.data() + base + 1;
    if (OneIdARow(static_cast<int>(f))) {
      const size_t first = ids.size();
      ids.resize(first + un);
      ConvertSparseOne(static_cast<int>(f), r0, n, ids.data() + first, 1);
      for (size_t i = 0; i < un; ++i) ends[i] = static_cast<uint32_t>(first + 1 + i);
    } else {
      fit = std::min(fit, ConvertSparseBag(static_cast<int>(f), r0, fit, kMaxIdsPerField, &ids,
                                           ends, run_bad));
    }
  }
  if (!known) {
    // The rows past `fit` were not converted by every column.
    known_bad_.assign(run_bad_.begin(), run_bad_.begin() + fit);
    known_first_ = r0;
    known_end_ = r0 + fit;
  }
  int64_t good = 0;
  while (good < fit && run_bad[good] < 0) ++good;
  if (good < n) {
    // Rows from `good` on are not this call's: the bad row, or past a limit.
    const size_t keep = base + static_cast<size_t>(good);
    b.labels.resize(keep);
    b.extra_labels.resize(keep * ne);
    b.dense.resize(keep * nd);
    for (size_t f = 0; f < ns; ++f) {
      b.offsets[f].resize(keep + 1);
      b.ids[f].resize(b.offsets[f][keep]);
    }
  }
  next_row_ = r0 + good;
  builder->AddedRows(static_cast<int>(good));
  a.rows = good;
  if (good < fit) {
    next_row_ = r0 + good + 1;
    *bad = BadReason(run_bad[good], r0 + good);
  }
  return a;
}

absl::StatusOr<bool> ParquetRows::Next(ParsedRow* row, std::string* bad) {
  bad->clear();
  PS_ASSIGN_OR_RETURN(bool more, EnsureRows());
  if (!more) return false;
  if (next_row_ < block_.first || next_row_ >= block_.first + block_.size) {
    ConvertBlock(next_row_, std::min(kBlockRows, group_rows_ - next_row_));
  }
  const int64_t r = next_row_++;
  const size_t i = static_cast<size_t>(r - block_.first);
  if (block_.bad[i] >= 0) {
    *bad = BadReason(block_.bad[i], r);
    return true;
  }
  row->label = block_.label[i];
  const auto span = [i](const auto& v, size_t width) {
    return std::make_pair(v.begin() + static_cast<ptrdiff_t>(i * width),
                          v.begin() + static_cast<ptrdiff_t>((i + 1) * width));
  };
  const auto [extra_begin, extra_end] = span(block_.extra, extra_.size());
  row->extra_labels.assign(extra_begin, extra_end);
  const auto [dense_begin, dense_end] = span(block_.dense, dense_.size());
  row->dense.assign(dense_begin, dense_end);
  const size_t num_sparse = sparse_.size();
  if (block_.one_id_a_row) {
    const auto [ids_begin, ids_end] = span(block_.row_ids, num_sparse);
    row->ids.assign(ids_begin, ids_end);
    row->field_end.resize(num_sparse);
    for (size_t f = 0; f < num_sparse; ++f) row->field_end[f] = static_cast<uint32_t>(f + 1);
    return true;
  }
  row->ids.clear();
  row->field_end.resize(num_sparse);
  for (size_t f = 0; f < num_sparse; ++f) {
    const std::vector<uint64_t>& ids = block_.ids[f];
    const std::vector<uint32_t>& ends = block_.ends[f];
    if (ends.empty()) {
      row->ids.push_back(block_.row_ids[i * num_sparse + f]);
    } else {
      row->ids.insert(row->ids.end(), ids.begin() + (i == 0 ? 0 : ends[i - 1]),
                      ids.begin() + ends[i]);
    }
    row->field_end[f] = static_cast<uint32_t>(row->ids.size());
  }
  return true;
}

}  // namespace pstrain::worker
