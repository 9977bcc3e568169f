// Frame packing: payloads planned into fewer frames and split again must be
// the same bytes, in order; slices of one allocation travel without a copy;
// a layout that points outside the frames received is an error.
#include "common/frame_pack.h"

#include <cstring>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>

namespace pstrain {
namespace {

Buffer Bytes(size_t n, uint8_t seed) {
  std::vector<uint8_t> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = static_cast<uint8_t>(seed + i * 7);
  return Buffer::FromVector(std::move(v));
}

// What a receiver gets: each frame copied into its own aligned allocation.
std::vector<Buffer> OverTheWire(const std::vector<Buffer>& frames) {
  std::vector<Buffer> out;
  for (const Buffer& f : frames) out.push_back(Buffer::Copy(f.data(), f.size()));
  return out;
}

void ExpectSame(const std::vector<Buffer>& want, const std::vector<Buffer>& got) {
  ASSERT_EQ(want.size(), got.size());
  for (size_t i = 0; i < want.size(); ++i) {
    ASSERT_EQ(want[i].size(), got[i].size()) << "payload " << i;
    if (want[i].size() > 0) {
      EXPECT_EQ(std::memcmp(want[i].data(), got[i].data(), want[i].size()), 0) << "payload " << i;
      EXPECT_EQ(reinterpret_cast<uintptr_t>(got[i].data()) % 8, 0u) << "payload " << i;
    }
  }
}

TEST(FramePack, SmallPayloadsShareOneFrameAndComeBackInOrder) {
  std::vector<Buffer> payloads;
  // Odd sizes: each must start at an 8-byte boundary again on arrival.
  for (int i = 0; i < 40; ++i) payloads.push_back(Bytes(100 + 13 * i, static_cast<uint8_t>(i)));
  payloads.insert(payloads.begin() + 5, Buffer());  // an empty one
  PackedPayloads packed;
  ASSERT_TRUE(PackPayloads(payloads, &packed));
  EXPECT_EQ(packed.frames.size(), 1u);
  auto got = UnpackPayloads(packed.layout, OverTheWire(packed.frames), 1024);
  ASSERT_TRUE(got.ok()) << got.status();
  ExpectSame(payloads, *got);
}

TEST(FramePack, SlicesOfOneAllocationTravelAsOneFrameWithoutACopy) {
  // A pull reply: one allocation cut per table, plus a big payload of its own.
  uint8_t* dst = nullptr;
  Buffer whole = Buffer::Allocate(26 * 40000, &dst);
  std::iota(dst, dst + whole.size(), uint8_t{0});
  std::vector<Buffer> payloads;
  for (int t = 0; t < 26; ++t) payloads.push_back(whole.Slice(t * 40000, 40000 - 8 * (t % 3)));
  payloads.push_back(Bytes(200000, 9));
  PackedPayloads packed;
  ASSERT_TRUE(PackPayloads(payloads, &packed));
  ASSERT_EQ(packed.frames.size(), 2u);
  EXPECT_EQ(packed.frames[0].data(), whole.data());  // not copied
  EXPECT_EQ(packed.frames[1].data(), payloads.back().data());
  auto got = UnpackPayloads(packed.layout, OverTheWire(packed.frames), 1024);
  ASSERT_TRUE(got.ok()) << got.status();
  ExpectSame(payloads, *got);
}

TEST(FramePack, InterleavedSlicesOfTwoAllocationsTravelAsTwoFrames) {
  // A push: ids of table k, then its gradients, table after table; the ids
  // of all tables in one allocation, the gradients in another.
  uint8_t* ids = nullptr;
  uint8_t* grads = nullptr;
  Buffer all_ids = Buffer::Allocate(26 * 2400, &ids);
  Buffer all_grads = Buffer::Allocate(26 * 19200, &grads);
  std::iota(ids, ids + all_ids.size(), uint8_t{1});
  std::iota(grads, grads + all_grads.size(), uint8_t{2});
  std::vector<Buffer> payloads;
  for (int t = 0; t < 26; ++t) {
    payloads.push_back(all_ids.Slice(t * 2400, 2400));
    payloads.push_back(all_grads.Slice(t * 19200, 19200));
  }
  PackedPayloads packed;
  ASSERT_TRUE(PackPayloads(payloads, &packed));
  ASSERT_EQ(packed.frames.size(), 2u);
  EXPECT_EQ(packed.frames[0].data(), all_ids.data());  // neither copied
  EXPECT_EQ(packed.frames[1].data(), all_grads.data());
  auto got = UnpackPayloads(packed.layout, OverTheWire(packed.frames), 1024);
  ASSERT_TRUE(got.ok()) << got.status();
  ExpectSame(payloads, *got);
}

TEST(FramePack, NothingToGainSendsThePayloadsAsTheyAre) {
  PackedPayloads packed;
  EXPECT_FALSE(PackPayloads({Bytes(10, 1)}, &packed));
  EXPECT_FALSE(PackPayloads({Bytes(10, 1), Bytes(10, 2)}, &packed));  // 1 frame + layout
  EXPECT_FALSE(PackPayloads({Bytes(1 << 20, 1), Bytes(1 << 20, 2), Bytes(1 << 20, 3)}, &packed));
  EXPECT_TRUE(PackPayloads({Bytes(10, 1), Bytes(10, 2), Bytes(10, 3)}, &packed));
}

TEST(FramePack, CopiedFramesStayUnderTheirSizeLimit) {
  std::vector<Buffer> payloads;
  for (int i = 0; i < 200; ++i) payloads.push_back(Bytes(kPackCopyBelowBytes, 3));
  PackedPayloads packed;
  ASSERT_TRUE(PackPayloads(payloads, &packed));
  for (const Buffer& f : packed.frames) EXPECT_LE(f.size(), kPackCopyFrameBytes);
  auto got = UnpackPayloads(packed.layout, OverTheWire(packed.frames), 1024);
  ASSERT_TRUE(got.ok()) << got.status();
  ExpectSame(payloads, *got);
}

TEST(FramePack, ABadLayoutIsRefusedWithWhatIsWrong) {
  std::vector<Buffer> payloads;
  for (int i = 0; i < 8; ++i) payloads.push_back(Bytes(64, static_cast<uint8_t>(i)));
  PackedPayloads packed;
  ASSERT_TRUE(PackPayloads(payloads, &packed));
  const std::vector<Buffer> frames = OverTheWire(packed.frames);
  auto with_entry = [&](size_t k, size_t field_offset, uint64_t value) {
    std::string bytes(packed.layout.view());
    std::memcpy(bytes.data() + 8 + 24 * k + field_offset, &value, sizeof(value));
    return Buffer::FromString(std::move(bytes));
  };
  // Size past the frame's end, offset past it, a frame that was not sent.
  for (const Buffer& bad : {with_entry(3, 16, 1 << 20), with_entry(7, 8, ~uint64_t{0} - 8),
                            with_entry(0, 0, 5)}) {
    auto got = UnpackPayloads(bad, frames, 1024);
    EXPECT_FALSE(got.ok());
    EXPECT_NE(got.status().message().find("outside the 1 frames"), std::string::npos)
        << got.status();
  }
  // Truncated layout, a count that disagrees, more payloads than allowed.
  EXPECT_FALSE(UnpackPayloads(packed.layout.Slice(0, 30), frames, 1024).ok());
  std::string count(packed.layout.view());
  count[0] = 9;
  EXPECT_FALSE(UnpackPayloads(Buffer::FromString(std::move(count)), frames, 1024).ok());
  EXPECT_FALSE(UnpackPayloads(packed.layout, frames, 7).ok());
  EXPECT_TRUE(UnpackPayloads(packed.layout, frames, 8).ok());
}

// Random layouts over random frames, as a hostile peer could send: either
// refused, or every payload lies inside one of the frames received.
TEST(FramePack, RandomLayoutsAreRefusedOrStayInsideTheFrames) {
  std::mt19937_64 rng(17);
  int accepted = 0;
  for (int round = 0; round < 20000; ++round) {
    std::vector<Buffer> frames;
    const int nframes = static_cast<int>(rng() % 4);
    for (int f = 0; f < nframes; ++f) frames.push_back(Bytes(rng() % 300, static_cast<uint8_t>(f)));
    const size_t entries = rng() % 6;
    std::vector<uint64_t> words(1 + 3 * entries);
    words[0] = round % 7 == 0 ? rng() : entries;  // the count, sometimes wrong
    for (size_t k = 0; k < entries; ++k) {
      words[1 + 3 * k] = rng() % 5 == 0 ? rng() : rng() % 4;       // frame (and the zero word)
      words[2 + 3 * k] = rng() % 5 == 0 ? rng() : rng() % 320;     // offset
      words[3 + 3 * k] = rng() % 5 == 0 ? ~uint64_t{0} - rng() % 8 : rng() % 320;  // size
    }
    std::string layout(reinterpret_cast<const char*>(words.data()), words.size() * 8);
    if (round % 11 == 0 && !layout.empty()) layout.resize(rng() % layout.size());
    auto got = UnpackPayloads(Buffer::FromString(std::move(layout)), frames, 1024);
    if (!got.ok()) continue;
    ++accepted;
    for (const Buffer& p : *got) {
      if (p.empty()) continue;
      bool inside = false;
      for (const Buffer& f : frames) {
        inside |= p.data() >= f.data() && p.data() + p.size() <= f.data() + f.size();
      }
      // A slice at an odd offset is copied: then only its size is bounded.
      if (!inside) inside = p.size() <= 300;
      ASSERT_TRUE(inside) << "round " << round;
    }
  }
  EXPECT_GT(accepted, 100);  // the well-formed ones were taken
}

}  // namespace
}  // namespace pstrain
