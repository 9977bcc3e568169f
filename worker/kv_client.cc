#include "worker/kv_client.h"

#include <cstring>

#include "absl/strings/str_cat.h"
#include "cluster/sparse_owner.h"
#include "common/half.h"

namespace pstrain::worker {

using proto::DType;
using proto::KvPart;
using proto::KvRequest;
using proto::MsgType;

namespace {

// What one part of one server's reply is for.
struct ReplyPart {
  bool sparse = false;
  int output = 0;            // dense: index in the dense list; sparse: index in the sparse list
  uint64_t table_offset = 0; // dense: where the range starts in the table
  uint64_t count = 0;        // dense: floats; sparse: rows
  std::vector<uint32_t> positions;  // sparse, when split: output row of each reply row
};

// The ids of several tables split by owning server: per server, one
// allocation of all its ids, table after table, and where each came from.
class OwnerSplit {
 public:
  // Ids of table k going to server s, as a slice of that server's buffer.
  Buffer ids(size_t k, int s) const {
    const size_t at = start_[k * servers_ + s];
    return buffers_[s].Slice(at * sizeof(uint64_t), count(k, s) * sizeof(uint64_t));
  }
  size_t count(size_t k, int s) const { return counts_[k * servers_ + s]; }
  // Their positions in table k's ids (several servers only).
  const uint32_t* positions(size_t k, int s) const {
    return positions_[s].data() + start_[k * servers_ + s];
  }

 private:
  friend OwnerSplit SplitByOwner(const std::vector<std::span<const uint64_t>>& ids, int servers);
  size_t servers_ = 1;
  std::vector<size_t> counts_, start_;  // [table * servers + server]
  std::vector<Buffer> buffers_;
  std::vector<std::vector<uint32_t>> positions_;
};

OwnerSplit SplitByOwner(const std::vector<std::span<const uint64_t>>& ids, int servers) {
  OwnerSplit out;
  const size_t S = static_cast<size_t>(servers);
  out.servers_ = S;
  out.counts_.assign(ids.size() * S, 0);
  out.start_.assign(ids.size() * S, 0);
  std::vector<size_t> total(S, 0);
  std::vector<uint16_t> owner;  // several servers: each id's, tables end to end
  if (S == 1) {
    for (size_t k = 0; k < ids.size(); ++k) {
      out.start_[k] = total[0];
      out.counts_[k] = ids[k].size();
      total[0] += ids[k].size();
    }
  } else {
    for (const auto& t : ids) {
      for (uint64_t id : t) owner.push_back(static_cast<uint16_t>(SparseOwner(id, servers)));
    }
    size_t i = 0;
    for (size_t k = 0; k < ids.size(); ++k) {
      for (size_t j = 0; j < ids[k].size(); ++j) ++out.counts_[k * S + owner[i++]];
      for (size_t s = 0; s < S; ++s) {
        out.start_[k * S + s] = total[s];
        total[s] += out.counts_[k * S + s];
      }
    }
  }
  std::vector<uint64_t*> dst(S, nullptr);
  for (size_t s = 0; s < S; ++s) {
    uint8_t* p = nullptr;
    out.buffers_.push_back(Buffer::Allocate(total[s] * sizeof(uint64_t), &p));
    dst[s] = reinterpret_cast<uint64_t*>(p);
  }
  if (S == 1) {
    for (size_t k = 0; k < ids.size(); ++k) {
      if (!ids[k].empty()) std::memcpy(dst[0] + out.start_[k], ids[k].data(), ids[k].size_bytes());
    }
    return out;
  }
  out.positions_.resize(S);
  for (size_t s = 0; s < S; ++s) out.positions_[s].resize(total[s]);
  std::vector<size_t> at(S);
  size_t i = 0;
  for (size_t k = 0; k < ids.size(); ++k) {
    for (size_t s = 0; s < S; ++s) at[s] = out.start_[k * S + s];
    for (size_t j = 0; j < ids[k].size(); ++j) {
      const size_t s = owner[i++];
      dst[s][at[s]] = ids[k][j];
      out.positions_[s][at[s]] = static_cast<uint32_t>(j);
      ++at[s];
    }
  }
  return out;
}

}  // namespace

struct PullHandle::State {
  std::vector<RpcFuture> futures;
  std::vector<int> servers;
  std::vector<std::vector<ReplyPart>> parts;  // per future
  std::vector<SparsePull> sparse;
  std::vector<uint32_t> sparse_dims;
  bool split = false;  // several servers: each sends part of a table's rows
  std::vector<uint32_t> dense_tables;
  std::vector<uint64_t> dense_sizes;
  std::vector<int> dense_pieces;  // ranges per dense table
  bool f16 = false;  // values come as half floats
};

KvClient::KvClient(RpcNode* node, proto::TableLayout layout,
                   const std::vector<std::string>& servers, KvClientOptions options)
    : node_(node), layout_(std::move(layout)), options_(options) {
  for (const std::string& ep : servers) peers_.push_back(node_->Connect(ep));
  ranges_.resize(layout_.tables.size());
  for (const proto::DenseRange& r : layout_.dense_ranges) ranges_[r.table].push_back(r);
}

proto::Header KvClient::MakeHeader(MsgType type, int64_t clock) const {
  proto::Header h;
  h.type = type;
  h.sender_role = proto::Role::kWorker;
  h.sender_rank = options_.rank;
  h.step = clock;
  h.epoch = layout_.epoch;
  return h;
}

KvClient::OutgoingPull KvClient::BuildPull(const std::vector<uint32_t>& dense_tables,
                                           const std::vector<SparsePull>& sparse,
                                           int64_t clock) const {
  const int S = num_servers();
  auto st = std::make_shared<PullHandle::State>();
  st->f16 = options_.pull_f16;
  st->sparse = sparse;
  st->dense_tables = dense_tables;
  std::vector<KvRequest> bodies(S);
  std::vector<std::vector<Buffer>> payloads(S);
  std::vector<std::vector<DType>> types(S);
  std::vector<std::vector<ReplyPart>> parts(S);
  for (size_t k = 0; k < dense_tables.size(); ++k) {
    uint32_t t = dense_tables[k];
    st->dense_sizes.push_back(layout_.tables[t].size);
    st->dense_pieces.push_back(static_cast<int>(ranges_[t].size()));
    for (const proto::DenseRange& r : ranges_[t]) {
      bodies[r.server].parts.push_back(KvPart{t, r.begin, r.length});
      ReplyPart p;
      p.output = static_cast<int>(k);
      p.table_offset = r.begin;
      p.count = r.length;
      parts[r.server].push_back(std::move(p));
    }
  }
  st->split = S > 1;
  std::vector<std::span<const uint64_t>> all_ids;
  for (const SparsePull& sp : sparse) {
    st->sparse_dims.push_back(layout_.tables[sp.table].dim);
    all_ids.push_back(sp.ids);
  }
  // Every table's ids for a server in one allocation, a slice each.
  const OwnerSplit split = SplitByOwner(all_ids, S);
  for (size_t k = 0; k < sparse.size(); ++k) {
    const SparsePull& sp = sparse[k];
    for (int s = 0; s < S; ++s) {
      const size_t n = split.count(k, s);
      // One server gets every table (even without ids); several, those with some.
      if (n == 0 && S > 1) continue;
      bodies[s].parts.push_back(KvPart{sp.table, 0, n});
      payloads[s].push_back(split.ids(k, s));
      types[s].push_back(DType::kU64);
      ReplyPart p;
      p.sparse = true;
      p.output = static_cast<int>(k);
      p.count = n;
      if (S > 1) p.positions.assign(split.positions(k, s), split.positions(k, s) + n);
      parts[s].push_back(std::move(p));
    }
  }
  OutgoingPull out;
  out.messages.resize(S);
  for (int s = 0; s < S; ++s) {
    if (bodies[s].parts.empty()) continue;
    bodies[s].values_f16 = options_.pull_f16;
    out.messages[s] = proto::Encode(MakeHeader(MsgType::kPull, clock), bodies[s],
                                    std::move(payloads[s]), types[s]);
    st->servers.push_back(s);
    st->parts.push_back(std::move(parts[s]));
  }
  out.handle.state_ = std::move(st);
  return out;
}

PullHandle KvClient::Pull(const std::vector<uint32_t>& dense_tables,
                          const std::vector<SparsePull>& sparse, int64_t clock) {
  OutgoingPull pull = BuildPull(dense_tables, sparse, clock);
  const absl::Time deadline = absl::Now() + options_.request_timeout;
  for (int s : pull.handle.state_->servers) {
    pull.handle.state_->futures.push_back(
        node_->Call(peers_[s], *std::move(pull.messages[s]), deadline));
  }
  return std::move(pull.handle);
}

absl::StatusOr<std::vector<Buffer>> PullHandle::Wait(std::vector<Buffer>* sparse_rows) {
  if (!state_) return absl::FailedPreconditionError("Wait on an empty pull handle");
  State& st = *state_;
  // Where each sparse table's rows go: its `out`, or a Buffer (assembled
  // only when several servers each sent part of them).
  std::vector<float*> out(st.sparse.size(), nullptr);
  if (sparse_rows != nullptr) sparse_rows->assign(st.sparse.size(), Buffer());
  for (size_t k = 0; k < st.sparse.size(); ++k) {
    out[k] = st.sparse[k].out;
    if (out[k] != nullptr) continue;
    if (sparse_rows == nullptr) return absl::InvalidArgumentError("pull rows with nowhere to go");
    if (st.split) {
      uint8_t* dst = nullptr;
      (*sparse_rows)[k] = Buffer::Allocate(
          st.sparse[k].ids.size() * st.sparse_dims[k] * sizeof(float), &dst);
      out[k] = reinterpret_cast<float*>(dst);
    }
  }
  std::vector<Buffer> dense(st.dense_tables.size());
  std::vector<uint8_t*> assembled(st.dense_tables.size(), nullptr);
  for (size_t k = 0; k < dense.size(); ++k) {
    if (st.dense_pieces[k] > 1) {
      dense[k] = Buffer::Allocate(st.dense_sizes[k] * sizeof(float), &assembled[k]);
    }
  }
  for (size_t f = 0; f < st.futures.size(); ++f) {
    PS_ASSIGN_OR_RETURN(proto::Decoded d,
                        proto::DecodeReply(st.futures[f].Wait(),
                                           absl::StrCat("pull from server ", st.servers[f])));
    const std::vector<ReplyPart>& parts = st.parts[f];
    if (d.num_payloads() != parts.size()) {
      return absl::InternalError(absl::StrCat("server ", st.servers[f], " answered ",
                                              d.num_payloads(), " parts for ", parts.size()));
    }
    // Half floats (KvClientOptions::pull_f16): widened into one allocation
    // for the whole reply, a slice a part, before they are used as below.
    std::vector<Buffer> widened;
    if (st.f16) {
      size_t total = 0;
      for (size_t i = 0; i < parts.size(); ++i) {
        PS_RETURN_IF_ERROR(d.CheckPayload(i, DType::kF16));
        total += (d.payload(i).size() / sizeof(uint16_t) + 15) & ~size_t{15};
      }
      uint8_t* raw = nullptr;
      const Buffer all = Buffer::Allocate(total * sizeof(float), &raw);
      size_t at = 0;
      for (size_t i = 0; i < parts.size(); ++i) {
        const std::span<const uint16_t> h = d.payload_as<uint16_t>(i);
        HalvesToFloats(h.data(), reinterpret_cast<float*>(raw) + at, h.size());
        widened.push_back(all.Slice(at * sizeof(float), h.size() * sizeof(float)));
        at += (h.size() + 15) & ~size_t{15};  // 64-byte aligned rows
      }
    }
    for (size_t i = 0; i < parts.size(); ++i) {
      const ReplyPart& p = parts[i];
      if (!st.f16) PS_RETURN_IF_ERROR(d.CheckPayload(i, DType::kF32));
      const Buffer& values = st.f16 ? widened[i] : d.payload(i);
      uint64_t expect = p.sparse ? p.count * st.sparse_dims[p.output] : p.count;
      if (values.count<float>() != expect) {
        return absl::InternalError(absl::StrCat("server ", st.servers[f], " sent ",
                                                values.count<float>(), " values for ", expect));
      }
      if (!p.sparse) {
        if (assembled[p.output] == nullptr) {
          dense[p.output] = values;  // the whole table in one piece: no copy
        } else {
          std::memcpy(assembled[p.output] + p.table_offset * sizeof(float), values.data(),
                      values.size());
        }
        continue;
      }
      float* dst = out[p.output];
      size_t dim = st.sparse_dims[p.output];
      const float* src = values.as<float>().data();
      if (dst == nullptr) {
        (*sparse_rows)[p.output] = values;  // all of them from one server: no copy
      } else if (p.positions.empty()) {
        if (!values.empty()) std::memcpy(dst, src, values.size());
      } else {
        for (size_t r = 0; r < p.positions.size(); ++r) {
          std::memcpy(dst + static_cast<size_t>(p.positions[r]) * dim, src + r * dim,
                      dim * sizeof(float));
        }
      }
    }
  }
  return dense;
}

std::vector<std::vector<Message>> KvClient::BuildPush(const std::vector<DensePush>& dense,
                                                     const std::vector<SparsePush>& sparse,
                                                     uint32_t num_samples, int64_t clock,
                                                     bool retire) const {
  const int S = num_servers();
  std::vector<std::vector<DensePiece>> dense_parts(S);
  for (const DensePush& dp : dense) {
    for (const proto::DenseRange& r : ranges_[dp.table]) {
      dense_parts[r.server].push_back(DensePiece{
          KvPart{dp.table, r.begin, r.length},
          dp.grads.Slice(r.begin * sizeof(float), r.length * sizeof(float))});
    }
  }
  // Per server, its messages in sending order: pieces of a large dense push
  // first (partial), then the one that moves the clock.
  std::vector<std::vector<OutgoingPush>> messages(S);
  for (int s = 0; s < S; ++s) {
    messages[s] = CutDensePush(dense_parts[s]);
  }
  std::vector<std::span<const uint64_t>> all_ids;
  for (const SparsePush& sp : sparse) all_ids.push_back(sp.ids);
  const OwnerSplit split = SplitByOwner(all_ids, S);
  // Several servers: each one's gradient rows gathered into one allocation.
  std::vector<Buffer> grads(S);
  std::vector<float*> grad_dst(S, nullptr);
  for (int s = 0; s < S && S > 1; ++s) {
    size_t floats = 0;
    for (size_t k = 0; k < sparse.size(); ++k) {
      floats += split.count(k, s) * layout_.tables[sparse[k].table].dim;
    }
    uint8_t* dst = nullptr;
    grads[s] = Buffer::Allocate(floats * sizeof(float), &dst);
    grad_dst[s] = reinterpret_cast<float*>(dst);
  }
  std::vector<size_t> grad_at(S, 0);
  for (size_t k = 0; k < sparse.size(); ++k) {
    const SparsePush& sp = sparse[k];
    const size_t dim = layout_.tables[sp.table].dim;
    const float* src = sp.grads.as<float>().data();
    for (int s = 0; s < S; ++s) {
      const size_t n = split.count(k, s);
      if (n == 0 && S > 1) continue;
      Buffer g = sp.grads;  // one server: the trainer's buffer as it is
      if (S > 1) {
        const uint32_t* pos = split.positions(k, s);
        float* out = grad_dst[s] + grad_at[s];
        for (size_t r = 0; r < n; ++r) {
          std::memcpy(out + r * dim, src + static_cast<size_t>(pos[r]) * dim, dim * sizeof(float));
        }
        g = grads[s].Slice(grad_at[s] * sizeof(float), n * dim * sizeof(float));
        grad_at[s] += n * dim;
      }
      OutgoingPush& m = messages[s].back();
      m.body.parts.push_back(KvPart{sp.table, 0, n});
      m.payloads.push_back(split.ids(k, s));
      m.payloads.push_back(std::move(g));
      m.types.push_back(DType::kU64);
      m.types.push_back(DType::kF32);
    }
  }
  std::vector<std::vector<Message>> encoded(S);
  for (int s = 0; s < S; ++s) {
    for (size_t k = 0; k < messages[s].size(); ++k) {
      OutgoingPush& out = messages[s][k];
      out.body.num_samples = num_samples;
      const bool last = k + 1 == messages[s].size();
      out.body.partial = !last;
      out.body.retire = last && retire;
      encoded[s].push_back(proto::Encode(MakeHeader(MsgType::kPush, clock), out.body,
                                         std::move(out.payloads), out.types));
    }
  }
  return encoded;
}

PushHandle KvClient::Push(const std::vector<DensePush>& dense,
                          const std::vector<SparsePush>& sparse, uint32_t num_samples,
                          int64_t clock, bool retire) {
  std::vector<std::vector<Message>> messages = BuildPush(dense, sparse, num_samples, clock, retire);
  PushHandle h;
  SendPush(messages, /*keep_last=*/false, absl::Now() + options_.request_timeout, &h);
  return h;
}

void KvClient::SendPush(std::vector<std::vector<Message>>& messages, bool keep_last,
                        absl::Time deadline, PushHandle* h) {
  // Round robin over the servers, so every server starts on its first piece.
  size_t rounds = 0;
  for (const auto& m : messages) rounds = std::max(rounds, m.size());
  for (size_t k = 0; k < rounds; ++k) {
    for (size_t s = 0; s < messages.size(); ++s) {
      if (k >= messages[s].size() || (keep_last && k + 1 == messages[s].size())) continue;
      h->futures_.push_back(node_->Call(peers_[s], std::move(messages[s][k]), deadline));
      h->servers_.push_back(static_cast<int>(s));
    }
  }
}

std::pair<PushHandle, PullHandle> KvClient::PushPull(const std::vector<DensePush>& dense,
                                                     const std::vector<SparsePush>& sparse,
                                                     uint32_t num_samples, int64_t push_clock,
                                                     const std::vector<uint32_t>& dense_tables,
                                                     const std::vector<SparsePull>& pulls,
                                                     int64_t pull_clock) {
  std::vector<std::vector<Message>> push = BuildPush(dense, sparse, num_samples, push_clock, false);
  OutgoingPull pull = BuildPull(dense_tables, pulls, pull_clock);
  const absl::Time deadline = absl::Now() + options_.request_timeout;
  PushHandle push_handle;
  // Pieces of a large dense push go first, alone; the step's last push
  // message to each server travels with that server's pull.
  SendPush(push, /*keep_last=*/true, deadline, &push_handle);
  // Every server gets a push message each step (BuildPush): its last one
  // goes with the server's pull when it has one, else alone. Pull futures
  // stay in st.servers' (rising) order.
  PullHandle::State& st = *pull.handle.state_;
  for (size_t s = 0; s < push.size(); ++s) {
    Message last = std::move(push[s].back());
    if (!pull.messages[s].has_value()) {
      push_handle.futures_.push_back(node_->Call(peers_[s], std::move(last), deadline));
    } else {
      std::vector<Message> both;
      both.push_back(std::move(last));
      both.push_back(*std::move(pull.messages[s]));
      RpcFuture f = node_->Call(
          peers_[s], proto::EncodeBundle(MakeHeader(MsgType::kPushPull, pull_clock), std::move(both)),
          deadline);
      push_handle.futures_.push_back(f);
      st.futures.push_back(std::move(f));
    }
    push_handle.servers_.push_back(static_cast<int>(s));
  }
  return {std::move(push_handle), std::move(pull.handle)};
}

std::vector<KvClient::OutgoingPush> KvClient::CutDensePush(
    const std::vector<DensePiece>& parts) const {
  const uint64_t cap = options_.push_partition_bytes / sizeof(float);
  uint64_t total = 0;
  for (const DensePiece& p : parts) total += p.part.count;
  std::vector<OutgoingPush> out(1);
  if (cap == 0 || total <= cap) {
    for (const DensePiece& p : parts) out.back().Add(p.part, p.grads);
    return out;
  }
  uint64_t filled = 0, left = total;
  for (const DensePiece& p : parts) {
    for (uint64_t off = 0; off < p.part.count;) {
      const uint64_t n = std::min(p.part.count - off, cap - filled);
      out.back().Add(KvPart{p.part.table, p.part.begin + off, n},
                     p.grads.Slice(off * sizeof(float), n * sizeof(float)));
      off += n;
      filled += n;
      left -= n;
      if (filled == cap && left > 0) {
        out.emplace_back();
        filled = 0;
      }
    }
  }
  return out;
}

absl::Status PushHandle::Wait() {
  absl::Status first;
  for (size_t i = 0; i < futures_.size(); ++i) {
    absl::Status st = proto::DecodeReply(futures_[i].Wait(),
                                         absl::StrCat("push to server ", servers_[i]))
                          .status();
    if (!st.ok() && first.ok()) first = st;
  }
  futures_.clear();
  return first;
}

absl::Status KvClient::DumpSparse(uint32_t table, std::vector<uint64_t>* ids,
                                  std::vector<float>* rows) {
  std::vector<uint64_t> removed;
  return DumpExport(table, proto::DumpRequest{}, ids, rows, &removed);
}

absl::Status KvClient::DumpExport(uint32_t table, const proto::DumpRequest& export_request,
                                  std::vector<uint64_t>* ids, std::vector<float>* rows,
                                  std::vector<uint64_t>* removed) {
  constexpr uint64_t kPage = 1 << 20;
  const size_t dim = layout_.tables[table].dim;
  const bool delta = export_request.mode == proto::DumpMode::kChanged;
  for (int s = 0; s < num_servers(); ++s) {
    uint64_t offset = 0;
    while (true) {
      proto::DumpRequest req = export_request;
      req.table = table;
      req.offset = offset;
      req.max_rows = kPage;
      Message m = proto::Encode(MakeHeader(MsgType::kDumpRows, 0), req);
      PS_ASSIGN_OR_RETURN(
          proto::Decoded d,
          proto::DecodeReply(node_->Call(peers_[s], std::move(m), absl::Now() + options_.request_timeout).Wait(),
                             absl::StrCat("dump of ", layout_.tables[table].name, " from server ", s)));
      PS_RETURN_IF_ERROR(d.CheckPayload(0, DType::kU64));
      PS_RETURN_IF_ERROR(d.CheckPayload(1, DType::kF32));
      if (delta) PS_RETURN_IF_ERROR(d.CheckPayload(2, DType::kU64));
      auto got_ids = d.payload_as<uint64_t>(0);
      auto got_rows = d.payload_as<float>(1);
      if (got_rows.size() != got_ids.size() * dim) {
        return absl::InternalError(absl::StrCat("server ", s, " dumped rows of the wrong width"));
      }
      ids->insert(ids->end(), got_ids.begin(), got_ids.end());
      rows->insert(rows->end(), got_rows.begin(), got_rows.end());
      uint64_t got = got_ids.size();
      if (delta) {
        auto gone = d.payload_as<uint64_t>(2);
        removed->insert(removed->end(), gone.begin(), gone.end());
        got += gone.size();
      }
      offset += got;
      uint64_t total = static_cast<uint64_t>(std::max<int64_t>(0, d.header().step));
      if (got == 0 || offset >= total) break;
    }
  }
  return absl::OkStatus();
}

}  // namespace pstrain::worker
