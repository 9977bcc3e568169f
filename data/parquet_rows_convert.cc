// ParquetRows, its second half: a loaded row group's columns turned into
// what a row of text would give (data/parquet_rows.h): labels, dense values
// and each field's ids, a block of rows at a time (ConvertBlock, for Next)
// or a run straight into a batch's arrays (the Convert* of AppendRows), and
// the reason a bad row is bad. parquet_rows.cc opens files, binds columns
// and walks row groups; the slot readers are data/parquet_values.h's.
#include <algorithm>
#include <charconv>
#include <cmath>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/hash.h"
#include "data/label_rule.h"
#include "data/parquet_rows.h"
#include "data/parquet_values.h"
#include "data/time_parts.h"

namespace pstrain::worker {

using parquet::ColumnDescriptor;
using parquet::LogicalKind;
using parquet::PhysicalType;

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

}  // namespace pstrain::worker
