#include "data/parquet/value_decoder.h"

#include <algorithm>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "common/status.h"
#include "data/parquet/bit_util.h"
#include "data/parquet/delta_decoder.h"
#include "data/parquet/rle_decoder.h"

namespace pstrain::parquet {
namespace {

// Values are decoded in batches of this many through fixed buffers.
constexpr int64_t kBatch = 1024;
// byte string offsets are 32-bit.
constexpr uint64_t kMaxArena = UINT32_MAX;

absl::Status TooShort(const char* encoding, int64_t n, size_t size) {
  return absl::DataLossError(
      absl::StrCat(encoding, ": ", n, " values do not fit in ", size, " bytes"));
}

// Appends byte strings to a sink, the arena bounded by the caller's limit
// and 4 GiB.
class StringAppender {
 public:
  StringAppender(ValueSink out, uint64_t arena_limit)
      : out_(out), limit_(std::min<uint64_t>(kMaxArena, arena_limit)) {}

  // Room for `bytes` more bytes; ResourceExhausted when over the limit.
  absl::Status Reserve(uint64_t bytes) {
    const uint64_t used = out_.arena->size();
    if (used > limit_ || bytes > limit_ - used) {
      return absl::ResourceExhaustedError(
          absl::StrCat("byte strings pass the limit of ", limit_, " decoded bytes"));
    }
    return absl::OkStatus();
  }
  absl::Status Append(const void* p, size_t len) {
    PS_RETURN_IF_ERROR(Reserve(len));
    out_.arena->append(static_cast<const char*>(p), len);
    out_.offsets->push_back(static_cast<uint32_t>(out_.arena->size()));
    return absl::OkStatus();
  }

 private:
  ValueSink out_;
  uint64_t limit_;
};

// INT96 legacy timestamps: nanoseconds of the day, then the Julian day.
int64_t Int96ToNanos(const uint8_t* p) {
  constexpr int64_t kUnixEpochJulianDay = 2440588;
  constexpr uint64_t kNanosPerDay = 86400ull * 1000 * 1000 * 1000;
  const uint64_t nanos = LoadLE<uint64_t>(p);
  const int64_t days = int64_t{LoadLE<int32_t>(p + 8)} - kUnixEpochJulianDay;
  return static_cast<int64_t>(static_cast<uint64_t>(days) * kNanosPerDay + nanos);  // wraps
}

absl::Status DecodePlain(ValueType t, std::string_view data, int64_t n, uint64_t arena_limit,
                         ValueSink out) {
  const auto* p = reinterpret_cast<const uint8_t*>(data.data());
  const size_t size = data.size();
  auto fixed = [&](size_t width) { return static_cast<uint64_t>(n) <= size / width; };
  switch (t.type) {
    case PhysicalType::kBoolean: {
      if (static_cast<uint64_t>(n) > uint64_t{size} * 8) return TooShort("PLAIN", n, size);
      for (int64_t i = 0; i < n; ++i) out.ints->push_back((p[i >> 3] >> (i & 7)) & 1);
      return absl::OkStatus();
    }
    case PhysicalType::kInt32: {
      if (!fixed(4)) return TooShort("PLAIN", n, size);
      for (int64_t i = 0; i < n; ++i) out.ints->push_back(LoadLE<int32_t>(p + 4 * i));
      return absl::OkStatus();
    }
    case PhysicalType::kInt64: {
      if (!fixed(8)) return TooShort("PLAIN", n, size);
      const size_t base = out.ints->size();
      out.ints->resize(base + n);
      if (n > 0) std::memcpy(out.ints->data() + base, p, 8 * n);
      return absl::OkStatus();
    }
    case PhysicalType::kInt96: {
      if (!fixed(12)) return TooShort("PLAIN", n, size);
      for (int64_t i = 0; i < n; ++i) out.ints->push_back(Int96ToNanos(p + 12 * i));
      return absl::OkStatus();
    }
    case PhysicalType::kFloat: {
      if (!fixed(4)) return TooShort("PLAIN", n, size);
      for (int64_t i = 0; i < n; ++i) out.doubles->push_back(LoadLE<float>(p + 4 * i));
      return absl::OkStatus();
    }
    case PhysicalType::kDouble: {
      if (!fixed(8)) return TooShort("PLAIN", n, size);
      const size_t base = out.doubles->size();
      out.doubles->resize(base + n);
      if (n > 0) std::memcpy(out.doubles->data() + base, p, 8 * n);
      return absl::OkStatus();
    }
    case PhysicalType::kByteArray: {
      // Each value has a 4-byte length.
      if (!fixed(4)) return TooShort("PLAIN", n, size);
      StringAppender strings(out, arena_limit);
      size_t pos = 0;
      for (int64_t i = 0; i < n; ++i) {
        if (size - pos < 4) return TooShort("PLAIN", n, size);
        const uint32_t len = LoadLE<uint32_t>(p + pos);
        pos += 4;
        if (len > size - pos) return TooShort("PLAIN", n, size);
        PS_RETURN_IF_ERROR(strings.Append(p + pos, len));
        pos += len;
      }
      return absl::OkStatus();
    }
    case PhysicalType::kFixedLenByteArray: {
      const size_t len = static_cast<size_t>(t.type_length);
      if (!fixed(len)) return TooShort("PLAIN", n, size);
      StringAppender strings(out, arena_limit);
      for (int64_t i = 0; i < n; ++i) PS_RETURN_IF_ERROR(strings.Append(p + len * i, len));
      return absl::OkStatus();
    }
  }
  return absl::InternalError("unknown physical type");
}

// RLE booleans: a 4-byte length, then the hybrid with bit width 1.
absl::Status DecodeRleBooleans(std::string_view data, int64_t n, ValueSink out) {
  const auto* p = reinterpret_cast<const uint8_t*>(data.data());
  if (data.size() < 4) return TooShort("RLE", n, data.size());
  const uint32_t len = LoadLE<uint32_t>(p);
  if (len > data.size() - 4) return TooShort("RLE", n, data.size());
  RleBitPackedDecoder rle(p + 4, len, 1);
  uint8_t buf[kBatch];
  for (int64_t done = 0; done < n;) {
    const int64_t m = std::min(kBatch, n - done);
    PS_RETURN_IF_ERROR(rle.Get(buf, m));
    for (int64_t i = 0; i < m; ++i) out.ints->push_back(buf[i] & 1);
    done += m;
  }
  return absl::OkStatus();
}

// Indices into the dictionary: a bit-width byte, then the hybrid. Reads
// them in batches of at most kBatch, each checked against the dictionary.
class IndexReader {
 public:
  IndexReader(std::string_view data, int64_t dictionary_size)
      : data_(data), dictionary_size_(dictionary_size) {}

  absl::Status Init(int64_t n) {
    if (data_.empty()) return TooShort("RLE_DICTIONARY", n, 0);
    const auto* p = reinterpret_cast<const uint8_t*>(data_.data());
    const int bit_width = p[0];
    if (bit_width > 32) {
      return absl::DataLossError(absl::StrCat("dictionary index bit width ", bit_width));
    }
    rle_ = RleBitPackedDecoder(p + 1, data_.size() - 1, bit_width);
    return absl::OkStatus();
  }
  // The next m indices into out[0, m).
  absl::Status Next(uint32_t* out, int64_t m) {
    PS_RETURN_IF_ERROR(rle_.Get(out, m));
    // One pass for the maximum, the error path only when it is out of range.
    uint32_t max = 0;
    for (int64_t i = 0; i < m; ++i) max = std::max(max, out[i]);
    if (m > 0 && max >= dictionary_size_) {
      for (int64_t i = 0; i < m; ++i) {
        if (out[i] >= dictionary_size_) {
          return absl::DataLossError(absl::StrCat("dictionary index ", out[i],
                                                  " out of range (the dictionary has ",
                                                  dictionary_size_, " entries)"));
        }
      }
    }
    return absl::OkStatus();
  }

 private:
  std::string_view data_;
  int64_t dictionary_size_;
  RleBitPackedDecoder rle_;
};

// Dictionary-encoded values, each copied out of the dictionary.
absl::Status DecodeDictionaryValues(ValueType t, std::string_view data, int64_t n,
                                    const Dictionary* dict, uint64_t arena_limit, ValueSink out) {
  if (dict == nullptr || !dict->present) {
    return absl::DataLossError("dictionary-encoded page without a dictionary page");
  }
  IndexReader indices(data, dict->size);
  PS_RETURN_IF_ERROR(indices.Init(n));
  StringAppender strings(out, arena_limit);
  uint32_t idx[kBatch];
  for (int64_t done = 0; done < n;) {
    const int64_t m = std::min(kBatch, n - done);
    PS_RETURN_IF_ERROR(indices.Next(idx, m));
    switch (t.type) {
      case PhysicalType::kByteArray:
      case PhysicalType::kFixedLenByteArray:
        for (int64_t i = 0; i < m; ++i) {
          const uint32_t begin = dict->offsets[idx[i]], end = dict->offsets[idx[i] + 1];
          PS_RETURN_IF_ERROR(strings.Append(dict->arena.data() + begin, end - begin));
        }
        break;
      case PhysicalType::kFloat:
      case PhysicalType::kDouble: {
        const size_t base = out.doubles->size();
        out.doubles->resize(base + static_cast<size_t>(m));
        double* dst = out.doubles->data() + base;
        for (int64_t i = 0; i < m; ++i) dst[i] = dict->doubles[idx[i]];
        break;
      }
      default: {
        const size_t base = out.ints->size();
        out.ints->resize(base + static_cast<size_t>(m));
        int64_t* dst = out.ints->data() + base;
        for (int64_t i = 0; i < m; ++i) dst[i] = dict->ints[idx[i]];
        break;
      }
    }
    done += m;
  }
  return absl::OkStatus();
}

absl::Status DecodeDeltaBinaryPacked(ValueType t, std::string_view data, int64_t n, ValueSink out) {
  DeltaBinaryPackedDecoder d;
  PS_RETURN_IF_ERROR(d.Init(data, INT64_MAX));
  if (d.total() < n) {
    return absl::DataLossError(
        absl::StrCat("DELTA_BINARY_PACKED holds ", d.total(), " values, the page has ", n));
  }
  uint64_t buf[kBatch];
  for (int64_t done = 0; done < n;) {
    const int64_t m = std::min(kBatch, n - done);
    PS_RETURN_IF_ERROR(d.Next(buf, m));
    if (t.type == PhysicalType::kInt32) {
      for (int64_t i = 0; i < m; ++i) out.ints->push_back(static_cast<int32_t>(buf[i]));
    } else {
      for (int64_t i = 0; i < m; ++i) out.ints->push_back(static_cast<int64_t>(buf[i]));
    }
    done += m;
  }
  return absl::OkStatus();
}

// Decodes all `n` lengths of a DELTA_BINARY_PACKED run of lengths at the
// start of `data`: their end in `data` and their sum. DataLoss for a
// negative length or a count other than n.
absl::Status ScanLengths(std::string_view data, int64_t n, size_t* end, uint64_t* sum) {
  DeltaBinaryPackedDecoder d;
  PS_RETURN_IF_ERROR(d.Init(data, n));
  if (d.total() != n) {
    return absl::DataLossError(
        absl::StrCat("the page has ", n, " values, its lengths ", d.total()));
  }
  uint64_t buf[kBatch];
  *sum = 0;
  for (int64_t done = 0; done < n;) {
    const int64_t m = std::min(kBatch, n - done);
    PS_RETURN_IF_ERROR(d.Next(buf, m));
    for (int64_t i = 0; i < m; ++i) {
      const int32_t len = static_cast<int32_t>(buf[i]);
      if (len < 0) return absl::DataLossError(absl::StrCat("negative length ", len));
      *sum += static_cast<uint64_t>(len);
    }
    done += m;
  }
  *end = d.end();
  return absl::OkStatus();
}

// Lengths (DELTA_BINARY_PACKED), then the bytes of all values.
absl::Status DecodeDeltaLengthByteArray(std::string_view data, int64_t n, uint64_t arena_limit,
                                        ValueSink out) {
  size_t end;
  uint64_t sum;
  PS_RETURN_IF_ERROR(ScanLengths(data, n, &end, &sum));
  if (sum > data.size() - end) return TooShort("DELTA_LENGTH_BYTE_ARRAY", n, data.size());
  StringAppender strings(out, arena_limit);
  PS_RETURN_IF_ERROR(strings.Reserve(sum));
  out.arena->reserve(out.arena->size() + sum);
  DeltaBinaryPackedDecoder lengths;
  PS_RETURN_IF_ERROR(lengths.Init(data, n));
  const char* bytes = data.data() + end;
  uint64_t len[kBatch];
  for (int64_t done = 0; done < n;) {
    const int64_t m = std::min(kBatch, n - done);
    PS_RETURN_IF_ERROR(lengths.Next(len, m));
    for (int64_t i = 0; i < m; ++i) {
      const uint32_t l = static_cast<uint32_t>(len[i]);
      PS_RETURN_IF_ERROR(strings.Append(bytes, l));
      bytes += l;
    }
    done += m;
  }
  return absl::OkStatus();
}

// Prefix lengths (DELTA_BINARY_PACKED), suffix lengths (the same), then the
// suffixes' bytes; each value is the first `prefix` bytes of the previous
// value followed by its suffix.
absl::Status DecodeDeltaByteArray(ValueType t, std::string_view data, int64_t n,
                                  uint64_t arena_limit, ValueSink out) {
  size_t prefix_end, suffix_end;
  uint64_t prefix_sum, suffix_sum;
  PS_RETURN_IF_ERROR(ScanLengths(data, n, &prefix_end, &prefix_sum));
  const std::string_view rest = data.substr(prefix_end);
  PS_RETURN_IF_ERROR(ScanLengths(rest, n, &suffix_end, &suffix_sum));
  if (suffix_sum > rest.size() - suffix_end) {
    return TooShort("DELTA_BYTE_ARRAY", n, data.size());
  }
  DeltaBinaryPackedDecoder prefixes, suffixes;
  PS_RETURN_IF_ERROR(prefixes.Init(data, n));
  PS_RETURN_IF_ERROR(suffixes.Init(rest, n));
  StringAppender strings(out, arena_limit);
  const char* bytes = rest.data() + suffix_end;
  std::string& arena = *out.arena;
  uint64_t prev_len = 0;  // the previous value is the arena's last prev_len bytes
  uint64_t pre[kBatch], suf[kBatch];
  for (int64_t done = 0; done < n;) {
    const int64_t m = std::min(kBatch, n - done);
    PS_RETURN_IF_ERROR(prefixes.Next(pre, m));
    PS_RETURN_IF_ERROR(suffixes.Next(suf, m));
    for (int64_t i = 0; i < m; ++i) {
      const uint64_t prefix = static_cast<uint32_t>(pre[i]), suffix = static_cast<uint32_t>(suf[i]);
      if (prefix > prev_len) {
        return absl::DataLossError(absl::StrCat("DELTA_BYTE_ARRAY: prefix of ", prefix,
                                                " bytes of a ", prev_len, "-byte value"));
      }
      if (t.type == PhysicalType::kFixedLenByteArray &&
          prefix + suffix != static_cast<uint64_t>(t.type_length)) {
        return absl::DataLossError(absl::StrCat("DELTA_BYTE_ARRAY: a value of ", prefix + suffix,
                                                " bytes in a FIXED_LEN_BYTE_ARRAY(", t.type_length,
                                                ") column"));
      }
      PS_RETURN_IF_ERROR(strings.Reserve(prefix + suffix));
      const size_t old = arena.size();
      arena.resize(old + prefix + suffix);
      if (prefix > 0) std::memcpy(&arena[old], &arena[old - prev_len], prefix);
      if (suffix > 0) std::memcpy(&arena[old + prefix], bytes, suffix);
      bytes += suffix;
      out.offsets->push_back(static_cast<uint32_t>(arena.size()));
      prev_len = prefix + suffix;
    }
    done += m;
  }
  return absl::OkStatus();
}

// K streams of n bytes: byte k of value i is data[k * n + i].
absl::Status DecodeByteStreamSplit(ValueType t, std::string_view data, int64_t n,
                                   uint64_t arena_limit, ValueSink out) {
  size_t k;
  switch (t.type) {
    case PhysicalType::kFloat:
    case PhysicalType::kInt32: k = 4; break;
    case PhysicalType::kDouble:
    case PhysicalType::kInt64: k = 8; break;
    case PhysicalType::kFixedLenByteArray: k = static_cast<size_t>(t.type_length); break;
    default:
      return absl::UnimplementedError(absl::StrCat("BYTE_STREAM_SPLIT for ",
                                                   PhysicalTypeName(static_cast<int32_t>(t.type)),
                                                   " is not supported"));
  }
  if (static_cast<uint64_t>(n) > data.size() / k) {
    return TooShort("BYTE_STREAM_SPLIT", n, data.size());
  }
  const auto* p = reinterpret_cast<const uint8_t*>(data.data());
  const size_t stride = static_cast<size_t>(n);
  if (t.type == PhysicalType::kFixedLenByteArray) {
    StringAppender strings(out, arena_limit);
    PS_RETURN_IF_ERROR(strings.Reserve(uint64_t{k} * n));
    std::string value(k, '\0');
    for (size_t i = 0; i < stride; ++i) {
      for (size_t b = 0; b < k; ++b) value[b] = static_cast<char>(p[b * stride + i]);
      PS_RETURN_IF_ERROR(strings.Append(value.data(), k));
    }
    return absl::OkStatus();
  }
  uint8_t bytes[8];
  for (size_t i = 0; i < stride; ++i) {
    for (size_t b = 0; b < k; ++b) bytes[b] = p[b * stride + i];
    switch (t.type) {
      case PhysicalType::kFloat: out.doubles->push_back(LoadLE<float>(bytes)); break;
      case PhysicalType::kDouble: out.doubles->push_back(LoadLE<double>(bytes)); break;
      case PhysicalType::kInt32: out.ints->push_back(LoadLE<int32_t>(bytes)); break;
      default: out.ints->push_back(LoadLE<int64_t>(bytes)); break;
    }
  }
  return absl::OkStatus();
}

absl::Status NotFor(int32_t encoding, PhysicalType type) {
  return absl::UnimplementedError(absl::StrCat(EncodingName(encoding), " encoding of ",
                                               PhysicalTypeName(static_cast<int32_t>(type)),
                                               " values is not supported"));
}

}  // namespace

absl::Status DecodeValues(int32_t encoding, ValueType type, std::string_view data, int64_t n,
                          const Dictionary* dictionary, uint64_t arena_limit, ValueSink out) {
  const PhysicalType pt = type.type;
  const bool bytes = pt == PhysicalType::kByteArray || pt == PhysicalType::kFixedLenByteArray;
  switch (static_cast<Encoding>(encoding)) {
    case Encoding::kPlain: return DecodePlain(type, data, n, arena_limit, out);
    case Encoding::kPlainDictionary:
    case Encoding::kRleDictionary:
      if (pt == PhysicalType::kBoolean) break;
      return DecodeDictionaryValues(type, data, n, dictionary, arena_limit, out);
    case Encoding::kRle:
      if (pt != PhysicalType::kBoolean) break;
      return DecodeRleBooleans(data, n, out);
    case Encoding::kDeltaBinaryPacked:
      if (pt != PhysicalType::kInt32 && pt != PhysicalType::kInt64) break;
      return DecodeDeltaBinaryPacked(type, data, n, out);
    case Encoding::kDeltaLengthByteArray:
      if (pt != PhysicalType::kByteArray) break;
      return DecodeDeltaLengthByteArray(data, n, arena_limit, out);
    case Encoding::kDeltaByteArray:
      if (!bytes) break;
      return DecodeDeltaByteArray(type, data, n, arena_limit, out);
    case Encoding::kByteStreamSplit: return DecodeByteStreamSplit(type, data, n, arena_limit, out);
    default: break;
  }
  return NotFor(encoding, pt);
}

absl::Status DecodeDictionaryIndices(std::string_view data, int64_t n, int64_t dictionary_size,
                                     PodVector<uint32_t>* out) {
  IndexReader indices(data, dictionary_size);
  PS_RETURN_IF_ERROR(indices.Init(n));
  const size_t base = out->size();
  out->resize(base + static_cast<size_t>(n));
  uint32_t* dst = out->data() + base;
  for (int64_t done = 0; done < n;) {
    const int64_t m = std::min(kBatch, n - done);
    PS_RETURN_IF_ERROR(indices.Next(dst + done, m));
    done += m;
  }
  return absl::OkStatus();
}

}  // namespace pstrain::parquet
