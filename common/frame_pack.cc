#include "common/frame_pack.h"

#include <cstdint>
#include <cstring>

#include "absl/strings/str_cat.h"

namespace pstrain {
namespace {

constexpr size_t kLayoutHead = 8;
constexpr size_t kLayoutEntry = 24;
// Neighbouring slices of one allocation at most this far apart share a frame.
constexpr size_t kMaxGap = 64;

size_t Align8(size_t n) { return (n + 7) & ~size_t{7}; }

bool SameOwner(const std::shared_ptr<const void>& a, const std::shared_ptr<const void>& b) {
  return a != nullptr && !a.owner_before(b) && !b.owner_before(a);
}

struct Entry {
  uint32_t frame;
  uint32_t zero;
  uint64_t offset;
  uint64_t size;
};
static_assert(sizeof(Entry) == kLayoutEntry);

// A frame being planned: a run of one allocation (sent as it is) or small
// payloads copied together.
struct Planned {
  bool copy = false;
  const uint8_t* base = nullptr;  // run: its first byte
  size_t bytes = 0;               // run: end - base; copy: the frame's size
  std::shared_ptr<const void> owner;
};

}  // namespace

bool PackPayloads(const std::vector<Buffer>& payloads, PackedPayloads* out) {
  const size_t n = payloads.size();
  if (n < 2) return false;
  std::vector<Entry> entries(n, Entry{0, 0, 0, 0});
  std::vector<Planned> frames;
  size_t open_copy = SIZE_MAX;  // the copy frame still taking payloads
  for (size_t i = 0; i < n;) {
    const Buffer& first = payloads[i];
    if (first.empty()) {  // no bytes: any frame will do
      ++i;
      continue;
    }
    // The run of neighbouring slices of one allocation that starts here.
    const uint8_t* base = first.data();
    const uint8_t* end = base + first.size();
    size_t j = i + 1;
    for (; j < n; ++j) {
      const Buffer& p = payloads[j];
      if (p.empty() || !SameOwner(first.owner(), p.owner()) || p.data() < end ||
          static_cast<size_t>(p.data() - end) >= kMaxGap ||
          static_cast<size_t>(p.data() - base) % 8 != 0) {
        break;
      }
      end = p.data() + p.size();
    }
    const size_t run_bytes = static_cast<size_t>(end - base);
    if (run_bytes <= kPackCopyBelowBytes) {
      // Copied together with other small ones, each at an 8-byte boundary.
      for (size_t k = i; k < j; ++k) {
        const size_t size = payloads[k].size();
        if (open_copy == SIZE_MAX ||
            Align8(frames[open_copy].bytes) + size > kPackCopyFrameBytes) {
          open_copy = frames.size();
          frames.push_back(Planned{.copy = true});
        }
        Planned& f = frames[open_copy];
        f.bytes = Align8(f.bytes);
        entries[k] = Entry{static_cast<uint32_t>(open_copy), 0, f.bytes, size};
        f.bytes += size;
      }
    } else {
      const auto index = static_cast<uint32_t>(frames.size());
      for (size_t k = i; k < j; ++k) {
        entries[k] = Entry{index, 0, static_cast<uint64_t>(payloads[k].data() - base),
                           payloads[k].size()};
      }
      frames.push_back(Planned{.copy = false, .base = base, .bytes = run_bytes,
                               .owner = first.owner()});
    }
    i = j;
  }
  // The layout frame counts too.
  if (frames.empty() || frames.size() + 1 >= n) return false;

  out->frames.clear();
  out->frames.reserve(frames.size());
  std::vector<uint8_t*> copy_dst(frames.size(), nullptr);
  for (size_t f = 0; f < frames.size(); ++f) {
    if (frames[f].copy) {
      out->frames.push_back(Buffer::Allocate(frames[f].bytes, &copy_dst[f]));
    } else {
      out->frames.emplace_back(frames[f].base, frames[f].bytes, frames[f].owner);
    }
  }
  for (size_t k = 0; k < n; ++k) {
    const Entry& e = entries[k];
    if (e.size > 0 && copy_dst[e.frame] != nullptr) {
      std::memcpy(copy_dst[e.frame] + e.offset, payloads[k].data(), e.size);
    }
  }
  uint8_t* layout = nullptr;
  out->layout = Buffer::Allocate(kLayoutHead + n * kLayoutEntry, &layout);
  const uint32_t head[2] = {static_cast<uint32_t>(n), 0};
  std::memcpy(layout, head, kLayoutHead);
  std::memcpy(layout + kLayoutHead, entries.data(), n * kLayoutEntry);
  return true;
}

absl::StatusOr<std::vector<Buffer>> UnpackPayloads(const Buffer& layout,
                                                   const std::vector<Buffer>& frames,
                                                   size_t max_payloads) {
  if (layout.size() < kLayoutHead || (layout.size() - kLayoutHead) % kLayoutEntry != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("packed payloads: layout frame of ", layout.size(), " bytes"));
  }
  uint32_t head[2];
  std::memcpy(head, layout.data(), kLayoutHead);
  const size_t n = (layout.size() - kLayoutHead) / kLayoutEntry;
  if (head[0] != n || head[1] != 0 || n > max_payloads) {
    return absl::InvalidArgumentError(absl::StrCat("packed payloads: layout says ", head[0],
                                                   " payloads in ", n, " entries (limit ",
                                                   max_payloads, ")"));
  }
  std::vector<Buffer> payloads;
  payloads.reserve(n);
  for (size_t k = 0; k < n; ++k) {
    Entry e;
    std::memcpy(&e, layout.data() + kLayoutHead + k * kLayoutEntry, kLayoutEntry);
    if (e.size == 0) {
      payloads.emplace_back();
      continue;
    }
    if (e.frame >= frames.size() || e.zero != 0 || e.offset > frames[e.frame].size() ||
        e.size > frames[e.frame].size() - e.offset) {
      return absl::InvalidArgumentError(absl::StrCat(
          "packed payloads: payload ", k, " at frame ", e.frame, " offset ", e.offset, " size ",
          e.size, " is outside the ", frames.size(), " frames received"));
    }
    Buffer slice = frames[e.frame].Slice(e.offset, e.size);
    if (reinterpret_cast<uintptr_t>(slice.data()) % 8 != 0) {
      slice = Buffer::Copy(slice.data(), slice.size());
    }
    payloads.push_back(std::move(slice));
  }
  return payloads;
}

}  // namespace pstrain
