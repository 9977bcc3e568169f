#include "data/parquet_values.h"

#include <charconv>
#include <cmath>
#include <cstdlib>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "data/time_parts.h"

namespace pstrain::worker {

using parquet::ColumnData;
using parquet::ColumnDescriptor;
using parquet::LogicalKind;
using parquet::PhysicalType;

namespace {

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

}  // namespace

bool IsBytes(const ColumnDescriptor& c) {
  return c.type == PhysicalType::kByteArray || c.type == PhysicalType::kFixedLenByteArray;
}

double Pow10(int k) { return std::pow(10.0, static_cast<double>(k)); }

std::string Refusal(const ColumnDescriptor& c, bool list_ok) {
  if (!c.unsupported.empty()) return c.unsupported;
  if (c.is_list && !list_ok) return "a LIST (only a categorical column may be a list)";
  if (c.logical == LogicalKind::kInterval || c.logical == LogicalKind::kBson) {
    return absl::StrCat("of logical type ", parquet::LogicalKindName(c.logical));
  }
  return "";
}

void FillConstant(const std::string& value, int64_t rows, ColumnData* d) {
  const size_t n = static_cast<size_t>(rows);
  d->num_rows = d->num_values = rows;
  d->row_valid.assign(n, value.empty() ? 0 : 1);
  d->list_offsets.clear();
  d->value_valid.clear();
  d->ints.clear();
  d->doubles.clear();
  d->str_offsets.clear();
  d->arena.clear();
  d->dictionary_encoded = true;
  d->dict_index.assign(n, value.empty() ? 1 : 0);  // entry 1: the null slots' (empty)
  const auto len = static_cast<uint32_t>(value.size());
  d->dict_offsets = {0, len, len};
  d->dict_arena = value;
}

bool SlotNumber(const ColumnData& d, const ColumnDescriptor& c, const MissingTokens& missing,
                int64_t i, double* v) {
  if (!d.valid(i)) return false;
  switch (c.type) {
    case PhysicalType::kFloat:
    case PhysicalType::kDouble:
      // NaN is missing (text's "NaN" token); an infinity is not a number,
      // as the text "inf" is not.
      *v = d.doubles[static_cast<size_t>(i)];
      return std::isfinite(*v);
    case PhysicalType::kByteArray:
    case PhysicalType::kFixedLenByteArray: {
      if (c.logical == LogicalKind::kDecimal) {
        __int128 unscaled;
        if (!parquet::DecimalBytesToInt128(d.bytes(i), &unscaled)) return false;
        *v = static_cast<double>(unscaled) / Pow10(c.scale);
        return true;
      }
      const std::string_view t = d.bytes(i);
      if (missing.Contains(t)) return false;
      return absl::SimpleAtod(absl::string_view(t.data(), t.size()), v) && std::isfinite(*v);
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

std::string_view SlotToken(const ColumnData& d, const ColumnDescriptor& c, int64_t i,
                           std::string* scratch) {
  if (!d.valid(i)) return {};
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

bool SlotSeconds(const ColumnData& d, const ColumnDescriptor& c, int64_t i, int64_t* seconds) {
  if (!d.valid(i)) return false;
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

}  // namespace pstrain::worker
