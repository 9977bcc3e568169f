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

// Neighbouring slices of one allocation, in the order of their addresses
// (not necessarily next to each other in the message).
struct Run {
  const uint8_t* base = nullptr;
  const uint8_t* end = nullptr;
  std::shared_ptr<const void> owner;
  std::vector<size_t> members;  // payload positions
};
// Runs still open to a next slice: a message interleaves a few allocations
// (a push: ids, gradients, ids, gradients, ...).
constexpr size_t kOpenRuns = 8;

}  // namespace

bool PackPayloads(const std::vector<Buffer>& payloads, PackedPayloads* out) {
  const size_t n = payloads.size();
  if (n < 2) return false;
  std::vector<Run> runs;
  for (size_t k = 0; k < n; ++k) {
    const Buffer& p = payloads[k];
    if (p.empty()) continue;  // no bytes: any frame will do
    Run* into = nullptr;
    for (size_t r = runs.size(); r > 0 && r + kOpenRuns > runs.size(); --r) {
      Run& run = runs[r - 1];
      if (SameOwner(run.owner, p.owner()) && p.data() >= run.end &&
          static_cast<size_t>(p.data() - run.end) < kMaxGap &&
          static_cast<size_t>(p.data() - run.base) % 8 == 0) {
        into = &run;
        break;
      }
    }
    if (into == nullptr) {
      runs.push_back(Run{p.data(), p.data(), p.owner(), {}});
      into = &runs.back();
    }
    into->end = p.data() + p.size();
    into->members.push_back(k);
  }
  // Small runs are copied together, each payload at an 8-byte boundary;
  // the others go as they are.
  std::vector<Entry> entries(n, Entry{0, 0, 0, 0});
  std::vector<size_t> copy_bytes;    // per frame: its size, or SIZE_MAX for a run
  std::vector<const Run*> run_of;    // per frame: the run sent as it is
  size_t open_copy = SIZE_MAX;
  for (const Run& run : runs) {
    const size_t bytes = static_cast<size_t>(run.end - run.base);
    if (bytes > kPackCopyBelowBytes) {
      for (size_t k : run.members) {
        entries[k] = Entry{static_cast<uint32_t>(run_of.size()), 0,
                           static_cast<uint64_t>(payloads[k].data() - run.base),
                           payloads[k].size()};
      }
      copy_bytes.push_back(SIZE_MAX);
      run_of.push_back(&run);
      continue;
    }
    for (size_t k : run.members) {
      const size_t size = payloads[k].size();
      if (open_copy == SIZE_MAX || Align8(copy_bytes[open_copy]) + size > kPackCopyFrameBytes) {
        open_copy = copy_bytes.size();
        copy_bytes.push_back(0);
        run_of.push_back(nullptr);
      }
      size_t& at = copy_bytes[open_copy];
      at = Align8(at);
      entries[k] = Entry{static_cast<uint32_t>(open_copy), 0, at, size};
      at += size;
    }
  }
  // The layout frame counts too.
  const size_t frames = copy_bytes.size();
  if (frames == 0 || frames + 1 >= n) return false;

  out->frames.clear();
  out->frames.reserve(frames);
  std::vector<uint8_t*> copy_dst(frames, nullptr);
  for (size_t f = 0; f < frames; ++f) {
    if (run_of[f] == nullptr) {
      out->frames.push_back(Buffer::Allocate(copy_bytes[f], &copy_dst[f]));
    } else {
      const Run& run = *run_of[f];
      out->frames.emplace_back(run.base, static_cast<size_t>(run.end - run.base), run.owner);
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
                                                   std::span<const Buffer> frames,
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
