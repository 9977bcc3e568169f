// The decoding of one column chunk: its pages in order (an optional
// dictionary page, then data pages v1 and v2; index pages are skipped) into
// a ColumnData. Internal to ParquetFile, which finds the chunk's bytes and
// checks the chunk's metadata against the file first.
//
// Per data page: v1 pages hold repetition levels, definition levels (each
// RLE with a 4-byte length) and the values, all inside the compressed body;
// v2 pages hold the levels uncompressed before the body, whose values are
// compressed when is_compressed is set. Levels become rows, list offsets and
// validity (column.h); the values are decoded densely and spread over the
// slots of the non-null values.
#pragma once

#include <cstdint>
#include <memory>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "data/parquet/column.h"
#include "data/parquet/compression.h"
#include "data/parquet/value_decoder.h"

namespace pstrain::parquet {
namespace internal {

// Buffers a ColumnData keeps between reads.
struct ColumnScratch {
  std::string chunk;             // the chunk's bytes, when read from a file
  std::unique_ptr<char[]> page;  // a decompressed page
  size_t page_capacity = 0;
  PodVector<uint8_t> def_levels;
  PodVector<uint8_t> rep_levels;
  Dictionary dictionary;
  CodecState codecs;
};

}  // namespace internal

// What the reader needs to know of the chunk, and names for errors.
struct ChunkInfo {
  std::string_view file_name;
  int row_group = 0;
  const ColumnDescriptor* column = nullptr;
  int32_t codec = 0;
  int64_t num_values = 0;      // the chunk metadata's
  int64_t row_group_rows = 0;  // the row group's num_rows
  int64_t file_offset = 0;     // of the chunk's first byte
};

// Decodes the chunk `bytes` into `*out`. Errors name the file, row group,
// column, and the page (index and file offset) where decoding stopped:
// DataLoss for corrupt data (a checksum mismatch included), Unimplemented
// for an encoding or page layout this reader does not support,
// ResourceExhausted past a limit of `options`. `*out` is unspecified after
// an error.
absl::Status ReadColumnChunk(const ChunkInfo& info, std::string_view bytes,
                             const ReadOptions& options, ColumnData* out);

}  // namespace pstrain::parquet
