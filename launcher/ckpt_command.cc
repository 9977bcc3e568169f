// pstrain ckpt inspect DIR: what a checkpoint holds, with every checksum
// verified.
#include <cstdio>

#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "common/checkpoint/shard_file.h"
#include "common/file_util.h"
#include "data/batch.h"
#include "launcher/commands.h"
#include "server/coordinator/checkpoint_manager.h"

namespace pstrain::launcher {
namespace {

absl::Status Inspect(const std::string& dir_arg) {
  // A checkpoint folder, or a --checkpoint_dir (then its LATEST).
  std::string dir = dir_arg;
  if (auto latest = ReadFileToString(dir + "/LATEST"); latest.ok()) {
    dir = absl::StrCat(dir, "/", absl::StripAsciiWhitespace(*latest));
  }
  auto m = server::ReadManifest(dir);
  if (!m.ok()) return m.status();
  std::printf("checkpoint %s\n  step %lld, written %s, %d servers, %d workers\n", dir.c_str(),
              static_cast<long long>(m->step), m->time.c_str(), m->num_servers, m->num_workers);
  // Per table: rows (sparse) or values (dense) and bytes, from the shards.
  std::vector<uint64_t> rows(m->tables.size(), 0), bytes(m->tables.size(), 0);
  bool ok = true;
  for (const server::ShardEntry& e : m->shards) {
    std::string path = dir + "/" + e.file;
    auto shard = ShardFile::Read(path);
    if (!shard.ok()) {
      std::printf("  %-18s BAD: %s\n", e.file.c_str(), shard.status().ToString().c_str());
      ok = false;
      continue;
    }
    bool match = (*shard)->checksum() == e.checksum;
    ok &= match;
    std::printf("  %-18s server %d, %llu bytes, checksum %s %s\n", e.file.c_str(), e.rank,
                static_cast<unsigned long long>((*shard)->bytes()), e.checksum.c_str(),
                match ? "OK" : "MISMATCH (manifest and file disagree)");
    for (const ShardFile::Section& s : (*shard)->sections()) {
      if (s.info.table >= rows.size()) continue;
      if (s.info.sketch) {  // the admission sketch: bytes, no rows
        bytes[s.info.table] += 2 * s.info.count;
        continue;
      }
      rows[s.info.table] += s.info.count;
      uint64_t per = s.info.kind == TableKind::kSparse
                         ? 12 + 4 * (uint64_t{s.info.dim} + s.info.state_floats)
                         : 4;
      bytes[s.info.table] += s.info.count * per + (s.info.kind == TableKind::kDense ? 4 * uint64_t{s.info.state_floats} : 0);
    }
  }
  std::printf("  %-24s %-7s %14s %14s\n", "table", "kind", "rows/values", "bytes");
  for (const TableSpec& t : m->tables) {
    std::printf("  %-24s %-7s %14llu %14llu%s\n", t.name.c_str(),
                t.kind == TableKind::kSparse ? "sparse" : "dense",
                static_cast<unsigned long long>(rows[t.id]), static_cast<unsigned long long>(bytes[t.id]),
                t.on_workers ? "  (on the workers)" : "");
  }
  for (const proto::WorkerPosition& p : m->workers) {
    // Where its next row is, when its reader knew: a restore starts there.
    const std::string next =
        p.source_range < 0 || p.finished
            ? ""
            : ", next row at " + worker::DescribePosition(worker::SourcePosition{
                                     p.source_range, p.source_row_group, p.source_row,
                                     p.source_offset, p.source_file});
    std::printf("  worker %d: clock %lld, epoch %d, %lld rows%s%s%s\n", p.rank,
                static_cast<long long>(p.clock), p.epoch, static_cast<long long>(p.rows),
                next.c_str(), p.finished ? ", finished" : "",
                p.state_file.empty() ? "" : absl::StrCat(", state in ", p.state_file).c_str());
  }
  if (!ok) return absl::DataLossError(absl::StrCat(dir, " is corrupt: see above"));
  std::printf("all checksums verified\n");
  return absl::OkStatus();
}

}  // namespace

std::string CkptHelp() {
  return "usage: pstrain ckpt inspect DIR\n\n"
         "Lists a checkpoint's tables (rows, bytes), its step and the workers' positions, and\n"
         "verifies every shard's checksum. DIR is a checkpoint folder (ckpt-...) or a\n"
         "--checkpoint_dir (its LATEST is inspected). Exit code 1 when anything is corrupt.\n";
}

absl::Status RunCkpt(const std::vector<std::string>& args) {
  if (args.size() == 2 && args[0] == "inspect") return Inspect(args[1]);
  return UsageError("expected `pstrain ckpt inspect DIR` (see --help)");
}

}  // namespace pstrain::launcher
