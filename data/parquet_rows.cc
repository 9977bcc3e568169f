// ParquetRows (data/parquet_rows.h): opening a file's range, binding the
// schema's columns by name, walking its row groups and handing out rows or
// runs of rows; parquet_rows_convert.cc turns a loaded row group's columns
// into them.
#include "data/parquet_rows.h"

#include <algorithm>
#include <limits>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/status.h"
#include "data/file_set.h"
#include "data/parquet_values.h"

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
