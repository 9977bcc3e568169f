#include "server/kv_store.h"

#include "absl/strings/str_cat.h"
#include "cluster/sparse_owner.h"

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

absl::Status KvStore::Push(const std::vector<KvOp>& ops, float scale) {
  for (const KvOp& op : ops) {
    if (op.sparse) {
      PS_RETURN_IF_ERROR(sparse_[op.table]->Push(op.ids, op.values.data(), scale));
    } else {
      PS_RETURN_IF_ERROR(dense_[op.table]->Push(op.begin, op.values, scale));
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
