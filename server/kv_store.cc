#include "server/kv_store.h"

#include "absl/strings/str_cat.h"
#include "cluster/sparse_owner.h"
#include "common/checkpoint/shard_file.h"

namespace pstrain::server {

using proto::DType;

absl::StatusOr<std::unique_ptr<KvStore>> KvStore::Create(const proto::TableLayout& layout,
                                                         int rank) {
  if (rank < 0 || rank >= layout.num_servers) {
    return absl::InvalidArgumentError(absl::StrCat("server rank ", rank, " outside the layout's ",
                                                   layout.num_servers, " servers"));
  }
  std::unique_ptr<KvStore> store(new KvStore(layout, rank));
  size_t n = layout.tables.size();
  store->dense_.resize(n);
  store->sparse_.resize(n);
  for (const TableSpec& spec : layout.tables) {
    if (spec.id >= n) return absl::InvalidArgumentError("table id outside the layout");
    if (spec.kind == TableKind::kSparse) {
      PS_ASSIGN_OR_RETURN(store->sparse_[spec.id], SparseTable::Create(spec));
    }
  }
  for (const proto::DenseRange& r : layout.dense_ranges) {
    if (r.server != rank) continue;
    if (r.table >= n || layout.tables[r.table].kind != TableKind::kDense) {
      return absl::InvalidArgumentError(absl::StrCat("dense range for table ", r.table,
                                                     " which is not a dense table"));
    }
    if (store->dense_[r.table]) {
      return absl::InvalidArgumentError(absl::StrCat("two ranges of table ", r.table,
                                                     " on one server"));
    }
    PS_ASSIGN_OR_RETURN(store->dense_[r.table],
                        DenseShard::Create(layout.tables[r.table], r.begin, r.length));
  }
  return store;
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
      const DenseShard* shard = dense_[part.table].get();
      if (shard == nullptr) {
        return absl::FailedPreconditionError(
            spec.on_workers ? absl::StrCat("table ", spec.name, " lives on the workers")
                            : absl::StrCat("table ", spec.name, " has no range on server ", rank_,
                                           " (stale cluster map?)"));
      }
      if (part.count == 0 || part.begin < shard->offset() ||
          part.begin - shard->offset() > shard->length() ||
          part.count > shard->length() - (part.begin - shard->offset())) {
        return absl::OutOfRangeError(absl::StrCat(
            "table ", spec.name, ": range [", part.begin, ", +", part.count,
            ") is not inside this server's [", shard->offset(), ", +", shard->length(), ")"));
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
  for (const KvOp& op : ops) {
    if (!op.sparse) {
      PS_ASSIGN_OR_RETURN(Buffer b, dense_[op.table]->Snapshot(op.begin, op.count));
      out->push_back(std::move(b));
      continue;
    }
    SparseTable* t = sparse_[op.table].get();
    uint8_t* dst = nullptr;
    Buffer b = Buffer::Allocate(op.ids.size() * t->dim() * sizeof(float), &dst);
    PS_RETURN_IF_ERROR(t->Pull(op.ids, reinterpret_cast<float*>(dst)));
    out->push_back(std::move(b));
  }
  return absl::OkStatus();
}

absl::Status KvStore::Push(const std::vector<KvOp>& ops, float scale, int64_t step) {
  for (const KvOp& op : ops) {
    const float lr_scale = WarmupScale(layout_.tables[op.table].optimizer, step);
    if (op.sparse) {
      PS_RETURN_IF_ERROR(sparse_[op.table]->Push(op.ids, op.values.data(), scale, lr_scale));
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
  t.ForEachRow([&](const SparseRow& row) {
    if (index >= offset && index < end) {
      ids->push_back(row.id);
      values->insert(values->end(), row.values.begin(), row.values.end());
    }
    ++index;
  });
  return static_cast<uint64_t>(t.size());
}

absl::StatusOr<std::pair<uint64_t, std::string>> KvStore::SaveShard(const std::string& path,
                                                                    uint64_t step) const {
  int sections = 0;
  for (size_t t = 0; t < layout_.tables.size(); ++t) sections += (dense_[t] || sparse_[t]) ? 1 : 0;
  PS_ASSIGN_OR_RETURN(auto w, ShardFileWriter::Open(path, rank_, layout_.num_servers, sections, step));
  for (size_t t = 0; t < layout_.tables.size(); ++t) {
    if (dense_[t]) {
      const DenseShard& d = *dense_[t];
      PS_RETURN_IF_ERROR(w->AddDense(static_cast<uint32_t>(t), d.offset(), d.weights(), d.state(),
                                     d.step()));
    } else if (sparse_[t]) {
      const SparseTable& sp = *sparse_[t];
      PS_RETURN_IF_ERROR(w->AddSparse(
          static_cast<uint32_t>(t), static_cast<uint32_t>(sp.dim()),
          static_cast<uint32_t>(sp.state_floats()), sp.size(),
          [&sp](ShardFileWriter::RowSink sink) {
            sp.ForEachRow([&sink](const SparseRow& r) { sink(r.id, r.step, r.values, r.state); });
          }));
    }
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
      if (info.kind == TableKind::kSparse) {
        SparseTable* t = sparse_[info.table].get();
        if (info.dim != t->dim() || info.state_floats != t->state_floats()) {
          return absl::DataLossError(absl::StrCat(file, ": table ", spec.name, " has dim/state ",
                                                  info.dim, "/", info.state_floats, ", the job ",
                                                  t->dim(), "/", t->state_floats()));
        }
        absl::Status st;
        shard->ForEachRow(sec, [&](const ShardFile::SparseRowView& r) {
          if (!st.ok() || SparseOwner(r.id, layout_.num_servers) != rank_) return;
          st = t->InsertRow(r.id, r.values, r.state, r.step);
        });
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
