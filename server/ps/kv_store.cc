#include "server/ps/kv_store.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "cluster/sparse_owner.h"
#include "common/checkpoint/shard_file.h"

namespace pstrain::server {

using proto::DType;

namespace {

// Dense ranges shorter than this many floats per part stay whole.
constexpr uint64_t kMinPieceFloats = 16384;
// Piece boundaries fall on 64-byte lines: no two threads write one line.
constexpr uint64_t kPieceAlign = 16;

}  // namespace

KvStore::Piece KvStore::PieceOf(uint32_t table, uint64_t offset, uint64_t length, int part,
                                int parts) {
  if (parts <= 1) return Piece{offset, length};
  const auto n = static_cast<uint64_t>(parts);
  if (length < n * kMinPieceFloats) {
    return static_cast<int>(table % n) == part ? Piece{offset, length} : Piece{offset, 0};
  }
  auto cut = [&](uint64_t k) {
    return k == n ? length : (length / n * k) / kPieceAlign * kPieceAlign;
  };
  const uint64_t lo = cut(static_cast<uint64_t>(part)), hi = cut(static_cast<uint64_t>(part) + 1);
  return Piece{offset + lo, hi - lo};
}

absl::StatusOr<std::unique_ptr<KvStore>> KvStore::Create(const proto::TableLayout& layout,
                                                         int rank, int part, int parts,
                                                         const TierConfig& tier) {
  if (rank < 0 || rank >= layout.num_servers) {
    return absl::InvalidArgumentError(absl::StrCat("server rank ", rank, " outside the layout's ",
                                                   layout.num_servers, " servers"));
  }
  if (parts < 1 || part < 0 || part >= parts) {
    return absl::InvalidArgumentError(absl::StrCat("part ", part, " of ", parts));
  }
  std::unique_ptr<KvStore> store(new KvStore(layout, rank, part, parts));
  size_t n = layout.tables.size();
  store->dense_.resize(n);
  store->sparse_.resize(n);
  store->server_ranges_.resize(n);
  for (const TableSpec& spec : layout.tables) {
    if (spec.id >= n) return absl::InvalidArgumentError("table id outside the layout");
    if (spec.kind == TableKind::kSparse) {
      // The table's max_rows is split evenly between every thread of every
      // server (ids are spread by hash).
      SparseTable::Options options;
      const uint64_t shards = static_cast<uint64_t>(layout.num_servers) * parts;
      options.evict_capacity = (spec.eviction.max_rows + shards - 1) / shards;
      PS_ASSIGN_OR_RETURN(store->sparse_[spec.id], SparseTable::Create(spec, options));
    }
  }
  for (const proto::DenseRange& r : layout.dense_ranges) {
    if (r.server != rank) continue;
    if (r.table >= n || layout.tables[r.table].kind != TableKind::kDense) {
      return absl::InvalidArgumentError(absl::StrCat("dense range for table ", r.table,
                                                     " which is not a dense table"));
    }
    if (store->server_ranges_[r.table].length > 0) {
      return absl::InvalidArgumentError(absl::StrCat("two ranges of table ", r.table,
                                                     " on one server"));
    }
    if (r.length == 0) return absl::InvalidArgumentError(absl::StrCat("empty range of table ", r.table));
    store->server_ranges_[r.table] = Piece{r.begin, r.length};
    Piece mine = PieceOf(r.table, r.begin, r.length, part, parts);
    if (mine.length == 0) continue;
    PS_ASSIGN_OR_RETURN(store->dense_[r.table],
                        DenseShard::Create(layout.tables[r.table], mine.begin, mine.length));
  }
  if (tier.enabled()) PS_RETURN_IF_ERROR(store->AttachTier(tier));
  return store;
}

absl::Status KvStore::AttachTier(const TierConfig& tier) {
  uint64_t dense_bytes = 0;
  size_t tables = 0;
  for (size_t t = 0; t < layout_.tables.size(); ++t) {
    if (dense_[t]) dense_bytes += (dense_[t]->length() + dense_[t]->state_floats()) * sizeof(float);
    if (sparse_[t]) ++tables;
  }
  if (tables == 0) return absl::OkStatus();
  const uint64_t share = tier.memory_budget / static_cast<uint64_t>(parts_);
  const uint64_t fixed = DiskTier::kFixedBytes + kProcessBytes / parts_ + dense_bytes;
  const uint64_t per_table = share > fixed ? (share - fixed) / tables : 0;
  // A row in RAM: its bytes and its index slot (at most 22.5 bytes, as the
  // index grows by half; RowIndex).
  constexpr uint64_t kIndexBytes = 23;
  for (size_t t = 0; t < layout_.tables.size(); ++t) {
    if (!sparse_[t]) continue;
    const TableSpec& spec = layout_.tables[t];
    const uint64_t rows = per_table / (sparse_[t]->row_bytes() + 2 * sizeof(float) + kIndexBytes);
    if (rows < kMinRamRows) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--server_memory_budget=", tier.memory_budget, " bytes leaves room for ", rows,
          " rows of table ", spec.name, " in RAM on server ", rank_, " (at least ", kMinRamRows,
          "): per server thread it must hold the disk tier's ", DiskTier::kFixedBytes >> 20,
          " MiB, ", (kProcessBytes / parts_) >> 20, " MiB for the process and ",
          dense_bytes >> 20, " MiB of dense tables, then the sparse tables' rows"));
    }
    if (!tier_) {
      PS_ASSIGN_OR_RETURN(tier_, DiskTier::Open(absl::StrCat(tier.dir, "/server", rank_, "-part",
                                                             part_),
                                                tier.store));
    }
    SparseTable::Options options;
    options.tier = tier_.get();
    options.ram_capacity = rows;
    options.ram_row_cost = sparse_[t]->row_bytes() + 2 * sizeof(float) + kIndexBytes;
    PS_ASSIGN_OR_RETURN(sparse_[t], SparseTable::Create(spec, options));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<KvOp>> KvStore::Validate(const proto::Decoded& request,
                                                    const proto::KvRequest& body,
                                                    bool is_push) const {
  std::vector<KvOp> ops;
  ops.reserve(body.parts.size());
  size_t payload = 0;
  auto next_payload = [&](DType t, uint64_t count, const TableSpec& spec) -> absl::Status {
    PS_RETURN_IF_ERROR(request.CheckPayload(payload, t));
    if (request.header().payloads[payload].count != count) {
      return absl::InvalidArgumentError(absl::StrCat(
          "table ", spec.name, ": payload ", payload, " has ",
          request.header().payloads[payload].count, " elements, expected ", count));
    }
    ++payload;
    return absl::OkStatus();
  };
  for (const proto::KvPart& part : body.parts) {
    if (part.table >= layout_.tables.size()) {
      return absl::NotFoundError(absl::StrCat("no table with id ", part.table));
    }
    const TableSpec& spec = layout_.tables[part.table];
    KvOp op;
    op.table = part.table;
    op.count = part.count;
    if (spec.kind == TableKind::kDense) {
      const Piece range = server_ranges_[part.table];
      if (range.length == 0) {
        return absl::FailedPreconditionError(
            spec.on_workers ? absl::StrCat("table ", spec.name, " lives on the workers")
                            : absl::StrCat("table ", spec.name, " has no range on server ", rank_,
                                           " (stale cluster map?)"));
      }
      if (part.count == 0 || part.begin < range.begin ||
          part.begin - range.begin > range.length ||
          part.count > range.length - (part.begin - range.begin)) {
        return absl::OutOfRangeError(absl::StrCat(
            "table ", spec.name, ": range [", part.begin, ", +", part.count,
            ") is not inside this server's [", range.begin, ", +", range.length, ")"));
      }
      op.begin = part.begin;
      if (is_push) {
        size_t p = payload;
        PS_RETURN_IF_ERROR(next_payload(DType::kF32, part.count, spec));
        op.values = request.payload_as<float>(p);
      }
    } else {
      op.sparse = true;
      size_t p = payload;
      PS_RETURN_IF_ERROR(next_payload(DType::kU64, part.count, spec));
      op.ids = request.payload_as<uint64_t>(p);
      for (uint64_t id : op.ids) {
        if (SparseOwner(id, layout_.num_servers) != rank_) {
          return absl::FailedPreconditionError(absl::StrCat(
              "table ", spec.name, ": id ", id, " belongs to server ",
              SparseOwner(id, layout_.num_servers), ", not ", rank_));
        }
      }
      if (is_push) {
        size_t g = payload;
        PS_RETURN_IF_ERROR(next_payload(DType::kF32, part.count * spec.dim, spec));
        op.values = request.payload_as<float>(g);
      }
    }
    ops.push_back(op);
  }
  if (payload != request.num_payloads()) {
    return absl::InvalidArgumentError(absl::StrCat(request.num_payloads(), " payloads for ",
                                                   payload, " expected"));
  }
  return ops;
}

absl::Status KvStore::Pull(const std::vector<KvOp>& ops, std::vector<Buffer>* out) {
  out->clear();
  out->reserve(ops.size());
  // The sparse rows of all tables in one allocation, a slice each: the reply
  // then leaves as one frame without a copy (common/frame_pack.h).
  auto rows_bytes = [&](const KvOp& op) {
    return (op.ids.size() * sparse_[op.table]->dim() * sizeof(float) + 63) & ~size_t{63};
  };
  size_t total = 0;
  for (const KvOp& op : ops) {
    if (op.sparse) total += rows_bytes(op);
  }
  uint8_t* rows = nullptr;
  const Buffer all_rows = total > 0 ? Buffer::Allocate(total, &rows) : Buffer();
  size_t offset = 0;
  for (const KvOp& op : ops) {
    if (!op.sparse) {
      PS_ASSIGN_OR_RETURN(Buffer b, dense_[op.table]->Snapshot(op.begin, op.count));
      out->push_back(std::move(b));
      continue;
    }
    SparseTable* t = sparse_[op.table].get();
    PS_RETURN_IF_ERROR(t->Pull(op.ids, reinterpret_cast<float*>(rows + offset)));
    out->push_back(all_rows.Slice(offset, op.ids.size() * t->dim() * sizeof(float)));
    offset += rows_bytes(op);
  }
  return absl::OkStatus();
}

absl::Status KvStore::Push(const std::vector<KvOp>& ops, float scale, int64_t step) {
  for (const KvOp& op : ops) {
    const float lr_scale = LrScheduleScale(layout_.tables[op.table].optimizer, step);
    if (op.sparse) {
      PS_RETURN_IF_ERROR(
          sparse_[op.table]->Push(op.ids, op.values.data(), scale, lr_scale, step));
    } else {
      PS_RETURN_IF_ERROR(dense_[op.table]->Push(op.begin, op.values, scale, lr_scale));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<uint64_t> KvStore::Dump(uint32_t table, uint64_t offset, uint64_t max_rows,
                                       std::vector<uint64_t>* ids,
                                       std::vector<float>* values) const {
  if (table >= sparse_.size() || !sparse_[table]) {
    return absl::InvalidArgumentError(absl::StrCat("table ", table, " is not a sparse table"));
  }
  const SparseTable& t = *sparse_[table];
  uint64_t index = 0;
  uint64_t end = offset + std::min<uint64_t>(max_rows, t.size());
  PS_RETURN_IF_ERROR(t.ForEachRow([&](const SparseRow& row) {
    if (index >= offset && index < end) {
      ids->push_back(row.id);
      values->insert(values->end(), row.values.begin(), row.values.end());
    }
    ++index;
  }));
  return static_cast<uint64_t>(t.size());
}

absl::StatusOr<std::pair<uint64_t, std::string>> KvStore::SaveShard(
    const std::vector<const KvStore*>& parts, const std::string& path, uint64_t step) {
  if (parts.empty()) return absl::InvalidArgumentError("no parts to save");
  const KvStore& first = *parts[0];
  const proto::TableLayout& layout = first.layout_;
  int sections = 0, sketches = 0;
  for (size_t t = 0; t < layout.tables.size(); ++t) {
    if (!first.holds(static_cast<uint32_t>(t))) continue;
    ++sections;
    if (first.sparse_[t] && first.sparse_[t]->sketch() != nullptr) ++sketches;
  }
  PS_ASSIGN_OR_RETURN(auto w, ShardFileWriter::Open(path, first.rank_, layout.num_servers,
                                                    sections + sketches, step, sketches > 0));
  for (size_t t = 0; t < layout.tables.size(); ++t) {
    const auto table = static_cast<uint32_t>(t);
    if (!first.holds(table)) continue;
    if (first.sparse_[t]) {
      uint64_t rows = 0;
      for (const KvStore* p : parts) rows += p->sparse_[t]->size();
      const SparseTable& sp = *first.sparse_[t];
      absl::Status read;
      PS_RETURN_IF_ERROR(w->AddSparse(
          table, static_cast<uint32_t>(sp.dim()), static_cast<uint32_t>(sp.state_floats()), rows,
          [&parts, &read, t](ShardFileWriter::RowSink sink) {
            for (const KvStore* p : parts) {
              if (!read.ok()) return;
              read = p->sparse_[t]->ForEachRow(
                  [&sink](const SparseRow& r) { sink(r.id, r.step, r.values, r.state); });
            }
          }));
      PS_RETURN_IF_ERROR(read);
      if (sp.sketch() != nullptr) {
        // One sketch per server: the cellwise max of its parts' (each part
        // counts the ids it owns, so the max undercounts none of them).
        CountMinSketch sum(sp.sketch()->width());
        for (const KvStore* p : parts) sum.MergeFrom(*p->sparse_[t]->sketch());
        PS_RETURN_IF_ERROR(w->AddSketch(table, CountMinSketch::kRows, sum.cells()));
      }
      continue;
    }
    // The pieces of the server's range, in part order (contiguous).
    std::vector<const DenseShard*> pieces;
    for (const KvStore* p : parts) {
      if (p->dense_[t]) pieces.push_back(p->dense_[t].get());
    }
    const Piece range = first.server_ranges_[t];
    if (pieces.size() == 1) {
      const DenseShard& d = *pieces[0];
      PS_RETURN_IF_ERROR(w->AddDense(table, d.offset(), d.weights(), d.state(), d.step()));
      continue;
    }
    // Split over threads: the section is written as one range, the state
    // plane by plane. Adam's step: the most pushes any piece has seen.
    const size_t planes = pieces.empty() ? 0 : pieces[0]->state_floats() / pieces[0]->length();
    std::vector<float> weights(range.length), state(planes * range.length);
    uint64_t dense_step = 0;
    for (const DenseShard* d : pieces) {
      const uint64_t at = d->offset() - range.begin;
      std::copy_n(d->weights().data(), d->length(), weights.data() + at);
      for (size_t k = 0; k < planes; ++k) {
        std::copy_n(d->state().data() + k * d->length(), d->length(),
                    state.data() + k * range.length + at);
      }
      dense_step = std::max(dense_step, d->step());
    }
    PS_RETURN_IF_ERROR(w->AddDense(table, range.begin, weights, state, dense_step));
  }
  PS_ASSIGN_OR_RETURN(std::string checksum, w->Finish());
  return std::make_pair(w->bytes(), checksum);
}

absl::Status KvStore::Restore(const std::vector<std::string>& shard_files) {
  // Dense shards are assembled whole (weights, state planes, step) and then
  // installed; coverage is checked so a missing file cannot go unnoticed.
  struct DenseBuild {
    std::vector<float> weights, state;
    uint64_t covered = 0, step = 0;
    size_t planes = 0;
  };
  std::vector<DenseBuild> build(layout_.tables.size());
  for (size_t t = 0; t < layout_.tables.size(); ++t) {
    if (!dense_[t]) continue;
    build[t].weights.assign(dense_[t]->length(), 0.0f);
    build[t].planes = dense_[t]->length() ? dense_[t]->state_floats() / dense_[t]->length() : 0;
    build[t].state.assign(dense_[t]->state_floats(), 0.0f);
  }
  for (const std::string& file : shard_files) {
    PS_ASSIGN_OR_RETURN(auto shard, ShardFile::Read(file));
    for (const ShardFile::Section& sec : shard->sections()) {
      const ShardSectionInfo& info = sec.info;
      if (info.table >= layout_.tables.size() || layout_.tables[info.table].kind != info.kind) {
        return absl::DataLossError(absl::StrCat(file, ": section for table ", info.table,
                                                " does not match the job's tables"));
      }
      const TableSpec& spec = layout_.tables[info.table];
      if (info.sketch) {
        // Every old server's sketch is merged (cellwise max) into this
        // shard's, whatever the server counts before and after: each id was
        // counted by one old server, so no id's count goes down; the ids of
        // other shards share counters as in one sketch of the whole table.
        CountMinSketch saved(CountMinSketch::kMinWidth);
        absl::Status st = CountMinSketch::FromCells(sec.sketch, &saved);
        if (!st.ok() || info.dim != CountMinSketch::kRows) {
          return absl::DataLossError(absl::StrCat(file, ": corrupt admission sketch of table ",
                                                  spec.name, ": ", st.message()));
        }
        sparse_[info.table]->MergeSketch(saved);
        continue;
      }
      if (info.kind == TableKind::kSparse) {
        SparseTable* t = sparse_[info.table].get();
        if (info.dim != t->dim() || info.state_floats != t->state_floats()) {
          return absl::DataLossError(absl::StrCat(file, ": table ", spec.name, " has dim/state ",
                                                  info.dim, "/", info.state_floats, ", the job ",
                                                  t->dim(), "/", t->state_floats()));
        }
        absl::Status st;
        t->AdvanceClock(shard->step());  // restored rows count as updated then
        absl::Status read = shard->ForEachRow(sec, [&](const ShardFile::SparseRowView& r) {
          if (!st.ok() || SparseOwner(r.id, layout_.num_servers) != rank_ ||
              SparseOwnerPart(r.id, layout_.num_servers, parts_) != part_) {
            return;
          }
          st = t->InsertRow(r.id, r.values, r.state, r.step);
        });
        PS_RETURN_IF_ERROR(read);
        if (st.ok()) st = t->FinishRestore();
        PS_RETURN_IF_ERROR(Annotate(st, file));
        continue;
      }
      DenseShard* mine = dense_[info.table].get();
      if (mine == nullptr) continue;  // another server's range now
      DenseBuild& b = build[info.table];
      size_t old_planes = info.count ? info.state_floats / info.count : 0;
      if (old_planes != b.planes) {
        return absl::DataLossError(absl::StrCat(file, ": table ", spec.name,
                                                " was saved with another optimizer"));
      }
      uint64_t lo = std::max(info.offset, mine->offset());
      uint64_t hi = std::min(info.offset + info.count, mine->offset() + mine->length());
      if (lo >= hi) continue;
      uint64_t n = hi - lo;
      std::copy_n(sec.weights.data() + (lo - info.offset), n, b.weights.data() + (lo - mine->offset()));
      for (size_t k = 0; k < b.planes; ++k) {
        std::copy_n(sec.state.data() + k * info.count + (lo - info.offset), n,
                    b.state.data() + k * mine->length() + (lo - mine->offset()));
      }
      b.covered += n;
      b.step = std::max(b.step, info.step);
    }
  }
  for (size_t t = 0; t < layout_.tables.size(); ++t) {
    if (!dense_[t]) continue;
    if (build[t].covered != dense_[t]->length()) {
      return absl::DataLossError(absl::StrCat("checkpoint covers ", build[t].covered, " of ",
                                              dense_[t]->length(), " values of table ",
                                              layout_.tables[t].name, " on server ", rank_,
                                              " (a shard file is missing?)"));
    }
    PS_RETURN_IF_ERROR(dense_[t]->Restore(build[t].weights, build[t].state, build[t].step));
  }
  // Fewer servers than the checkpoint's may hold more rows than they keep.
  for (const auto& t : sparse_) {
    if (t) PS_RETURN_IF_ERROR(t->EvictToCapacity());
  }
  return absl::OkStatus();
}

std::vector<TableStats> KvStore::Stats() const {
  std::vector<TableStats> out;
  for (const TableSpec& spec : layout_.tables) {
    TableStats s;
    s.name = spec.name;
    if (sparse_[spec.id]) {
      s.sparse = true;
      MemoryStats m = sparse_[spec.id]->memory_stats();
      s.rows = m.rows;
      s.bytes = m.total_bytes;
      s.index_bytes = m.index_bytes;
      s.scratch_bytes = m.scratch_bytes;
      s.value_bytes = m.value_bytes;
      s.state_bytes = m.state_bytes;
      s.sketch_bytes = m.sketch_bytes;
      const AdmissionStats& a = sparse_[spec.id]->admission_stats();
      s.admitted = a.admitted;
      s.refused_ids = a.refused_ids;
      s.refused_pushes = a.refused_pushes;
      s.evicted_capacity = sparse_[spec.id]->eviction_stats().capacity;
      s.evicted_ttl = sparse_[spec.id]->eviction_stats().ttl;
      if (const DiskTier* tier = sparse_[spec.id]->tier()) {
        const TierCounters& c = sparse_[spec.id]->tier_counters();
        s.tiered = true;
        s.ram_rows = m.ram_rows;
        s.disk_rows = m.disk_rows;
        s.tier_reads = c.reads;
        s.tier_hits = c.hits;
        s.tier_writes = c.writes;
        s.tier_disk_bytes = tier->disk_bytes();
      }
    } else if (dense_[spec.id]) {
      s.rows = dense_[spec.id]->length();
      s.bytes = (dense_[spec.id]->length() + dense_[spec.id]->state_floats()) * sizeof(float);
    } else {
      continue;
    }
    out.push_back(s);
  }
  return out;
}

}  // namespace pstrain::server
