// The RLE / bit-packing hybrid and DELTA_BINARY_PACKED decoders on inputs
// worked out by hand from Encodings.md.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "data/parquet/delta_decoder.h"
#include "data/parquet/rle_decoder.h"
#include "data/parquet/value_decoder.h"

namespace pstrain::parquet {
namespace {

const uint8_t* U8(const std::string& s) { return reinterpret_cast<const uint8_t*>(s.data()); }

TEST(RleBitPacked, RunsOfBothKinds) {
  // RLE: 5 x 3 (bit width 3: one value byte); bit-packed: one group of 8
  // values 0..7 (3 bytes, LSB first).
  const std::string data = std::string("\x0a\x03", 2) + "\x03" + "\x88\xc6\xfa";
  RleBitPackedDecoder d(U8(data), data.size(), 3);
  std::vector<uint32_t> out(13);
  ASSERT_TRUE(d.Get(out.data(), 13).ok());
  EXPECT_EQ(out, (std::vector<uint32_t>{3, 3, 3, 3, 3, 0, 1, 2, 3, 4, 5, 6, 7}));
  EXPECT_EQ(d.Get(out.data(), 1).code(), absl::StatusCode::kDataLoss);  // no more runs
}

// Long bit-packed runs of every width (unpacked 8 values at a time with
// unchecked loads while the data leaves room, value by value near its end),
// between RLE runs, read in pieces of every size: the values written.
TEST(RleBitPacked, LongBitPackedRunsOfEveryWidthReadInAnyPieces) {
  uint64_t seed = 12345;
  const auto next = [&seed] {
    seed = seed * 6364136223846793005ULL + 1442695040888963407ULL;
    return seed >> 17;
  };
  for (int width = 1; width <= 32; ++width) {
    SCOPED_TRACE(width);
    const uint64_t mask = (uint64_t{1} << width) - 1;
    std::vector<uint32_t> want;
    std::string data;
    const auto uleb = [&data](uint64_t v) {
      while (v >= 0x80) {
        data.push_back(static_cast<char>(v | 0x80));
        v >>= 7;
      }
      data.push_back(static_cast<char>(v));
    };
    const auto packed_run = [&](int groups) {
      uleb((static_cast<uint64_t>(groups) << 1) | 1);
      std::string packed(static_cast<size_t>(groups) * width, '\0');
      for (int i = 0; i < 8 * groups; ++i) {
        const uint32_t v = static_cast<uint32_t>(next() & mask);
        want.push_back(v);
        for (int b = 0; b < width; ++b) {
          if ((v >> b) & 1) {
            const size_t bit = static_cast<size_t>(i) * width + b;
            packed[bit / 8] = static_cast<char>(packed[bit / 8] | (1 << (bit % 8)));
          }
        }
      }
      data += packed;
    };
    for (int groups : {37, 1, 2, 11}) {  // bit-packed runs, each followed by an RLE run of 5
      packed_run(groups);
      const uint32_t r = static_cast<uint32_t>(next() & mask);
      uleb(5 << 1);
      for (int k = 0; k < (width + 7) / 8; ++k) data.push_back(static_cast<char>(r >> (8 * k)));
      want.insert(want.end(), 5, r);
    }
    packed_run(3);  // the data ends with a bit-packed run: no room to load past it
    for (int piece : {1, 3, 8, 13, 64, 100000}) {
      SCOPED_TRACE(piece);
      RleBitPackedDecoder d(U8(data), data.size(), width);
      std::vector<uint32_t> got(want.size());
      for (size_t done = 0; done < got.size();) {
        const int64_t m = std::min<int64_t>(piece, static_cast<int64_t>(got.size() - done));
        ASSERT_TRUE(d.Get(got.data() + done, m).ok());
        done += static_cast<size_t>(m);
      }
      EXPECT_EQ(got, want);
      if (width <= 8) {  // levels: into bytes
        RleBitPackedDecoder b(U8(data), data.size(), width);
        std::vector<uint8_t> bytes(want.size());
        ASSERT_TRUE(b.Get(bytes.data(), static_cast<int64_t>(bytes.size())).ok());
        EXPECT_EQ(std::vector<uint32_t>(bytes.begin(), bytes.end()), want);
      }
    }
  }
}

TEST(RleBitPacked, BitWidthZeroAndDataEndingEarly) {
  const std::string data("\x08", 1);  // 4 copies; bit width 0: no value byte
  RleBitPackedDecoder d(U8(data), data.size(), 0);
  uint8_t out[5];
  ASSERT_TRUE(d.Get(out, 4).ok());
  EXPECT_EQ(out[3], 0);
  EXPECT_EQ(d.Get(out, 1).code(), absl::StatusCode::kDataLoss);
}

TEST(RleBitPacked, TruncatedBitPackedRunIsAnErrorOnlyWhereValuesAreMissing) {
  const std::string data("\x03\xff", 2);  // a group of 8 2-bit values needs 2 bytes, has 1
  RleBitPackedDecoder d(U8(data), data.size(), 2);
  uint8_t out[8];
  ASSERT_TRUE(d.Get(out, 4).ok());  // the 4 values of the byte present
  EXPECT_EQ(out[0], 3);
  EXPECT_EQ(d.Get(out, 1).code(), absl::StatusCode::kDataLoss);
}

// Encodings.md's example: 1 2 3 4 5 -> block 128, 4 miniblocks, 5 values,
// first 1, min delta 1, bit widths 0.
TEST(DeltaBinaryPacked, SpecExample) {
  const std::string data("\x80\x01\x04\x05\x02\x02\x00\x00\x00\x00", 10);
  DeltaBinaryPackedDecoder d;
  ASSERT_TRUE(d.Init(data, 100).ok());
  EXPECT_EQ(d.total(), 5);
  uint64_t out[5];
  ASSERT_TRUE(d.Next(out, 5).ok());
  EXPECT_EQ(std::vector<uint64_t>(out, out + 5), (std::vector<uint64_t>{1, 2, 3, 4, 5}));
  EXPECT_EQ(d.end(), data.size());
}

TEST(DeltaBinaryPacked, NegativeDeltasWrap) {
  // 7 5 3 1 -1: first 7, min delta -2, widths 0.
  const std::string data("\x80\x01\x04\x05\x0e\x03\x00\x00\x00\x00", 10);
  DeltaBinaryPackedDecoder d;
  ASSERT_TRUE(d.Init(data, 5).ok());
  uint64_t out[5];
  ASSERT_TRUE(d.Next(out, 5).ok());
  EXPECT_EQ(static_cast<int64_t>(out[4]), -1);
}

TEST(DeltaBinaryPacked, BadHeadersAreErrors) {
  DeltaBinaryPackedDecoder d;
  // Block size not a multiple of 128.
  const std::string odd_block("\x40\x01\x01\x00", 4);
  EXPECT_EQ(d.Init(odd_block, 10).code(), absl::StatusCode::kDataLoss);
  // More values than allowed.
  const std::string too_many("\x80\x01\x04\x0b\x00", 5);
  EXPECT_EQ(d.Init(too_many, 5).code(), absl::StatusCode::kDataLoss);
  // Truncated blocks.
  const std::string no_blocks("\x80\x01\x04\x05\x00", 5);
  ASSERT_TRUE(d.Init(no_blocks, 5).ok());
  uint64_t out[5];
  EXPECT_EQ(d.Next(out, 5).code(), absl::StatusCode::kDataLoss);
  // A bit width over 64.
  const std::string wide("\x80\x01\x04\x05\x00\x00\x41\x00\x00\x00", 10);
  ASSERT_TRUE(d.Init(wide, 5).ok());
  EXPECT_EQ(d.Next(out, 5).code(), absl::StatusCode::kDataLoss);
}

TEST(ValueDecoders, EncodingNotValidForTheTypeIsUnimplemented) {
  PodVector<int64_t> ints;
  PodVector<double> doubles;
  ValueSink sink{&ints, &doubles, nullptr, nullptr};
  absl::Status st = DecodeValues(static_cast<int32_t>(Encoding::kDeltaLengthByteArray),
                                 ValueType{PhysicalType::kInt32}, "", 1, nullptr, 1 << 20, sink);
  EXPECT_EQ(st.code(), absl::StatusCode::kUnimplemented);
  EXPECT_EQ(st.message(), "DELTA_LENGTH_BYTE_ARRAY encoding of INT32 values is not supported");
}

TEST(ValueDecoders, DeltaByteArrayExpansionIsBounded) {
  // 3 values: "abcd", then prefix 4 + suffix "e", prefix 5 + "f": lengths
  // 4 5 6; a limit of 10 decoded bytes stops it. (Zigzag: 4 is 0x08, -3 0x05.)
  PodVector<uint32_t> offsets{0};
  std::string arena;
  ValueSink sink{nullptr, nullptr, &offsets, &arena};
  // Prefix lengths 0, 4, 5: first 0, min delta 1, widths 2 (deltas 4-0-1=3, 5-4-1=0).
  std::string data("\x80\x01\x04\x03\x00\x02\x02\x00\x00\x00\x03\x00\x00\x00\x00\x00\x00\x00", 18);
  // Suffix lengths 4, 1, 1: first 4, min delta -3, widths 2 (deltas 0, 3).
  data +=
      std::string("\x80\x01\x04\x03\x08\x05\x02\x00\x00\x00\x0c\x00\x00\x00\x00\x00\x00\x00", 18);
  data += "abcdef";
  ASSERT_TRUE(DecodeValues(static_cast<int32_t>(Encoding::kDeltaByteArray),
                           ValueType{PhysicalType::kByteArray}, data, 3, nullptr, 100, sink)
                  .ok());
  EXPECT_EQ(arena, "abcdabcdeabcdef");
  EXPECT_EQ(offsets, (PodVector<uint32_t>{0, 4, 9, 15}));
  offsets.assign(1, 0);
  arena.clear();
  EXPECT_EQ(DecodeValues(static_cast<int32_t>(Encoding::kDeltaByteArray),
                         ValueType{PhysicalType::kByteArray}, data, 3, nullptr, 10, sink)
                .code(),
            absl::StatusCode::kResourceExhausted);
}

}  // namespace
}  // namespace pstrain::parquet
