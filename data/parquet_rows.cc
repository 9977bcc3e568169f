#include "data/parquet_rows.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <limits>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "common/status.h"
#include "data/label_rule.h"
#include "data/time_parts.h"

namespace pstrain::worker {
namespace {

using parquet::ColumnDescriptor;
using parquet::LogicalKind;
using parquet::PhysicalType;

bool IsBytes(const ColumnDescriptor& c) {
  return c.type == PhysicalType::kByteArray || c.type == PhysicalType::kFixedLenByteArray;
}

// 10^k for the decimal scales a Parquet decimal can have (precision <= 38).
double Pow10(int k) { return std::pow(10.0, static_cast<double>(k)); }

// The text of unscaled decimal `v` at `scale` digits after the point, as a
// warehouse writes a decimal column to text: "-12.50" for (-1250, 2).
void DecimalText(__int128 v, int scale, std::string* out) {
  const bool negative = v < 0;
  unsigned __int128 u = negative ? -static_cast<unsigned __int128>(v) : static_cast<unsigned __int128>(v);
  char digits[48];
  int n = 0;
  do {
    digits[n++] = static_cast<char>('0' + static_cast<int>(u % 10));
    u /= 10;
  } while (u != 0 || n <= scale);
  out->clear();
  if (negative) out->push_back('-');
  for (int i = n - 1; i >= 0; --i) {
    out->push_back(digits[i]);
    if (i == scale && scale > 0) out->push_back('.');
  }
}

// What a role can take, or "" when the column can serve it.
std::string Refusal(const ColumnDescriptor& c, bool list_ok) {
  if (!c.unsupported.empty()) return c.unsupported;
  if (c.is_list && !list_ok) return "a LIST (only a categorical column may be a list)";
  if (c.logical == LogicalKind::kInterval || c.logical == LogicalKind::kBson) {
    return absl::StrCat("of logical type ", parquet::LogicalKindName(c.logical));
  }
  return "";
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
  group_rows_ = next_row_ = rows_left_after_ = 0;
}

absl::Status ParquetRows::Open(const std::string& path, uint64_t begin, uint64_t end) {
  Close();
  path_ = path;
  PS_ASSIGN_OR_RETURN(file_, parquet::ParquetFile::Open(path));
  const parquet::ParquetFile& f = *file_;
  // Bind each role's column by name.
  const auto bind = [&](int column, const char* role, bool list_ok, Bound* b) -> absl::Status {
    const std::string& name = schema_.column_names[static_cast<size_t>(column)];
    b->file_column = f.FindColumn(name);
    if (b->file_column < 0) {
      std::string names;
      for (const ColumnDescriptor& c : f.columns()) absl::StrAppend(&names, names.empty() ? "" : ", ", c.name);
      return absl::InvalidArgumentError(absl::StrCat(path, ": no column \"", name, "\" (the ", role,
                                                     "); its columns: ", names));
    }
    const ColumnDescriptor& c = f.columns()[static_cast<size_t>(b->file_column)];
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
    int64_t first = std::numeric_limits<int64_t>::max();
    for (size_t c = 0; c < f.columns().size(); ++c) {
      first = std::min(first, f.chunk_range(rg, static_cast<int>(c)).offset);
    }
    if (first == std::numeric_limits<int64_t>::max()) first = 0;
    if (static_cast<uint64_t>(first) >= begin && static_cast<uint64_t>(first) < end &&
        f.row_group_num_rows(rg) > 0) {
      row_groups_.push_back(rg);
      rows_left_after_ += f.row_group_num_rows(rg);
    }
  }
  return absl::OkStatus();
}

absl::Status ParquetRows::LoadRowGroup(int rg) {
  const auto load = [&](Bound* b) { return file_->ReadColumn(rg, b->file_column, &b->data); };
  PS_RETURN_IF_ERROR(load(&label_));
  for (Bound& b : extra_) PS_RETURN_IF_ERROR(load(&b));
  for (Bound& b : dense_) PS_RETURN_IF_ERROR(load(&b));
  for (Bound& b : sparse_) PS_RETURN_IF_ERROR(load(&b));
  group_ = rg;
  group_rows_ = file_->row_group_num_rows(rg);
  next_row_ = 0;
  rows_left_after_ -= group_rows_;
  return absl::OkStatus();
}

int64_t ParquetRows::RowsLeft() const { return group_rows_ - next_row_ + rows_left_after_; }

std::string ParquetRows::Where() const {
  return absl::StrCat(path_, ": row group ", group_, ", row ", next_row_);
}

bool ParquetRows::Number(const Bound& b, int64_t i, double* v) const {
  const parquet::ColumnData& d = b.data;
  if (!d.valid(i)) return false;
  const ColumnDescriptor& c = file_->columns()[static_cast<size_t>(b.file_column)];
  switch (c.type) {
    case PhysicalType::kFloat:
    case PhysicalType::kDouble:
      *v = d.doubles[static_cast<size_t>(i)];
      return !std::isnan(*v);
    case PhysicalType::kByteArray:
    case PhysicalType::kFixedLenByteArray: {
      if (c.logical == LogicalKind::kDecimal) {
        __int128 unscaled;
        if (!parquet::DecimalBytesToInt128(d.bytes(i), &unscaled)) return false;
        *v = static_cast<double>(unscaled) / Pow10(c.scale);
        return true;
      }
      const std::string_view t = d.bytes(i);
      if (missing_.Contains(t)) return false;
      return absl::SimpleAtod(absl::string_view(t.data(), t.size()), v) && !std::isnan(*v);
    }
    default: {
      const int64_t x = d.ints[static_cast<size_t>(i)];
      *v = c.logical == LogicalKind::kDecimal ? static_cast<double>(x) / Pow10(c.scale)
           : c.logical == LogicalKind::kInt && !c.int_signed && c.int_bits == 64
               ? static_cast<double>(static_cast<uint64_t>(x))
               : static_cast<double>(x);
      return true;
    }
  }
}

std::string_view ParquetRows::Token(const Bound& b, int64_t i, std::string* scratch) const {
  const parquet::ColumnData& d = b.data;
  if (!d.valid(i)) return {};
  const ColumnDescriptor& c = file_->columns()[static_cast<size_t>(b.file_column)];
  char buf[64];
  switch (c.type) {
    case PhysicalType::kByteArray:
    case PhysicalType::kFixedLenByteArray: {
      if (c.logical != LogicalKind::kDecimal) return d.bytes(i);
      __int128 unscaled;
      if (!parquet::DecimalBytesToInt128(d.bytes(i), &unscaled)) return d.bytes(i);
      DecimalText(unscaled, c.scale, scratch);
      return *scratch;
    }
    case PhysicalType::kFloat:
    case PhysicalType::kDouble: {
      // The shortest text that reads back as the same double.
      const auto r = std::to_chars(buf, buf + sizeof(buf), d.doubles[static_cast<size_t>(i)]);
      scratch->assign(buf, r.ptr);
      return *scratch;
    }
    default: {
      const int64_t x = d.ints[static_cast<size_t>(i)];
      if (c.logical == LogicalKind::kDecimal) {
        DecimalText(x, c.scale, scratch);
        return *scratch;
      }
      const auto r = c.logical == LogicalKind::kInt && !c.int_signed && c.int_bits == 64
                         ? std::to_chars(buf, buf + sizeof(buf), static_cast<uint64_t>(x))
                         : std::to_chars(buf, buf + sizeof(buf), x);
      scratch->assign(buf, r.ptr);
      return *scratch;
    }
  }
}

bool ParquetRows::Seconds(const Bound& b, int64_t i, int64_t* seconds) const {
  const parquet::ColumnData& d = b.data;
  if (!d.valid(i)) return false;
  const ColumnDescriptor& c = file_->columns()[static_cast<size_t>(b.file_column)];
  const auto floor_div = [](int64_t x, int64_t k) { return x / k - (x % k < 0 ? 1 : 0); };
  if (IsBytes(c)) {
    const std::string_view t = d.bytes(i);
    return ParseTimestamp(t, seconds);
  }
  if (c.type == PhysicalType::kFloat || c.type == PhysicalType::kDouble) {
    const double v = d.doubles[static_cast<size_t>(i)];
    if (!(std::abs(v) < 9e15)) return false;
    *seconds = static_cast<int64_t>(std::floor(v));
    return true;
  }
  const int64_t x = d.ints[static_cast<size_t>(i)];
  switch (c.logical) {
    case LogicalKind::kTimestampMillis:
      *seconds = floor_div(x, 1000);
      return true;
    case LogicalKind::kTimestampMicros:
      *seconds = floor_div(x, 1000000);
      return true;
    case LogicalKind::kTimestampNanos:
      *seconds = floor_div(x, 1000000000);
      return true;
    case LogicalKind::kDate:
      *seconds = x * 86400;
      return true;
    default:
      *seconds = x;
      return true;
  }
}

bool ParquetRows::Sparse(int f, int64_t r, ParsedRow* row, std::string* bad) {
  const SparseColumn& c = schema_.sparse[static_cast<size_t>(f)];
  const Bound& b = sparse_[static_cast<size_t>(f)];
  const int field = HashField(c, f);
  const size_t before = row->ids.size();
  if (c.time != TimePart::kNone) {
    int64_t seconds;
    if (Seconds(b, r, &seconds)) {
      char buf[8];
      const auto end = std::to_chars(buf, buf + sizeof(buf), TimePartOf(seconds, c.time)).ptr;
      row->ids.push_back(FeatureId(field, std::string_view(buf, end - buf), c.hash_buckets));
    } else if (b.data.valid(r) && !missing_.Contains(Token(b, r, &token_))) {
      *bad = absl::StrCat("column \"", schema_.column_names[static_cast<size_t>(c.column)],
                          "\": not a timestamp: \"", std::string(Token(b, r, &token_).substr(0, 40)), "\"");
      return false;
    } else {
      row->ids.push_back(MissingId(field, c.hash_buckets));
    }
    row->field_end[static_cast<size_t>(f)] = static_cast<uint32_t>(row->ids.size());
    return true;
  }
  const auto add = [&](int64_t slot) {
    const std::string_view t = Token(b, slot, &token_);
    if (!missing_.Contains(t)) row->ids.push_back(FeatureId(field, t, c.hash_buckets));
  };
  if (b.data.list_offsets.empty()) {
    add(r);
  } else if (b.data.row_valid[static_cast<size_t>(r)]) {
    for (uint32_t s = b.data.list_offsets[static_cast<size_t>(r)];
         s < b.data.list_offsets[static_cast<size_t>(r) + 1]; ++s) {
      add(s);
    }
  }
  if (row->ids.size() == before) row->ids.push_back(MissingId(field, c.hash_buckets));
  if (c.max_length > 0 && row->ids.size() - before > static_cast<size_t>(c.max_length)) {
    // Keep the last max_length ids: the most recent of a history.
    const size_t drop = row->ids.size() - before - static_cast<size_t>(c.max_length);
    row->ids.erase(row->ids.begin() + static_cast<ptrdiff_t>(before),
                   row->ids.begin() + static_cast<ptrdiff_t>(before + drop));
  }
  row->field_end[static_cast<size_t>(f)] = static_cast<uint32_t>(row->ids.size());
  return true;
}

absl::StatusOr<bool> ParquetRows::Next(ParsedRow* row, std::string* bad) {
  bad->clear();
  while (group_ < 0 || next_row_ == group_rows_) {
    if (next_group_ == row_groups_.size()) return false;
    PS_RETURN_IF_ERROR(LoadRowGroup(row_groups_[next_group_++]));
  }
  const int64_t r = next_row_++;
  double v;
  if (!Number(label_, r, &v) || !ApplyLabelRule(schema_.label, v, &row->label)) {
    *bad = absl::StrCat("column \"", schema_.label.name, "\": no label");
    return true;
  }
  row->extra_labels.resize(extra_.size());
  for (size_t k = 0; k < extra_.size(); ++k) {
    float y = std::numeric_limits<float>::quiet_NaN();
    if (Number(extra_[k], r, &v) && !ApplyLabelRule(schema_.extra_labels[k], v, &y)) {
      y = std::numeric_limits<float>::quiet_NaN();
    }
    row->extra_labels[k] = y;
  }
  row->dense.resize(dense_.size());
  for (size_t j = 0; j < dense_.size(); ++j) {
    const DenseColumn& dc = schema_.dense[j];
    if (dc.time != TimePart::kNone) {
      int64_t seconds;
      if (Seconds(dense_[j], r, &seconds)) {
        row->dense[j] = ApplyTransform(dc, TimePartOf(seconds, dc.time));
      } else if (dense_[j].data.valid(r) && !missing_.Contains(Token(dense_[j], r, &token_))) {
        *bad = absl::StrCat("column \"", schema_.column_names[static_cast<size_t>(dc.column)],
                            "\": not a timestamp: \"", std::string(Token(dense_[j], r, &token_).substr(0, 40)), "\"");
        return true;
      } else {
        row->dense[j] = missing_value_[j];
      }
      continue;
    }
    if (Number(dense_[j], r, &v)) {
      row->dense[j] = ApplyTransform(schema_.dense[j], v);
      continue;
    }
    const parquet::ColumnData& d = dense_[j].data;
    const ColumnDescriptor& c = file_->columns()[static_cast<size_t>(dense_[j].file_column)];
    if (d.valid(r) && IsBytes(c) && !missing_.Contains(d.bytes(r))) {
      *bad = absl::StrCat("column \"", schema_.dense[j].name, "\": not a number: \"",
                          std::string(d.bytes(r).substr(0, 40)), "\"");
      return true;
    }
    row->dense[j] = missing_value_[j];
  }
  row->ids.clear();
  row->field_end.resize(sparse_.size());
  for (size_t f = 0; f < sparse_.size(); ++f) {
    if (!Sparse(static_cast<int>(f), r, row, bad)) return true;
  }
  return true;
}

}  // namespace pstrain::worker
