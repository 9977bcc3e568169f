#!/usr/bin/python3
"""The reference DLRM in PyTorch, trained as pstrain trains its own.

Reads pstrain's Criteo layout (label, dense integers, categorical tokens,
tab-separated; an empty categorical token is the field's "missing" value),
applies pstrain's dense transform log(1 + max(x, 0)), gives each field's
tokens exact ids (no hashing, as pstrain without --hash_buckets), trains one
pass in file order with Adagrad (sparse rows updated only when used, as on
pstrain's servers) and prints one JSON line with eval AUC and logloss.

The architecture is DLRM-small as pstrain builds it: bottom MLP over the
dense features (ReLU after every layer, last width = embedding dim), one
embedding per field, the dot interaction's strict lower triangle after the
bottom output (Naumov et al.'s "dot"), top MLP with a linear 1-wide last
layer. Initializers are PyTorch's defaults for nn.Linear (weights and biases
U(+-1/sqrt(fan_in))) unless --zero_bias; embeddings U(+-1/sqrt(dim)) as
pstrain's default before 2026-12-07 (PyTorch's nn.Embedding default N(0, 1) with --embedding_init=normal,
the DLRM reference's U(+-sqrt(1 / rows)) with --embedding_init=dlrm).

Needs Debian's python3-torch (bench/torch_setup.sh installs it); never
needed by `make test`.
"""
import argparse
import json
import math
import sys
import time

import numpy as np
import torch
from torch import nn


M64 = (1 << 64) - 1


def mix64(x):
    """pstrain's Mix64 (splitmix64's finalizer) on a numpy uint64 array."""
    with np.errstate(over="ignore"):
        x = x + np.uint64(0x9E3779B97F4A7C15)
        x = (x ^ (x >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        x = (x ^ (x >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        return x ^ (x >> np.uint64(31))


def mix64_int(x):
    return int(mix64(np.array([x & M64], dtype=np.uint64))[0])


def feature_id(field, token):
    """pstrain's FeatureId: HashBytes(token, FieldSeed(field)), no hash buckets."""
    seed = mix64_int(0x7073747261696E00 + field)
    b = token.encode()
    h = mix64_int(seed ^ ((len(b) * 0x9DDFEA08EB382D69) & M64))
    i = 0
    while i + 8 <= len(b):
        h = mix64_int(h ^ int.from_bytes(b[i:i + 8], "little"))
        i += 8
    if i < len(b):
        h = mix64_int(h ^ int.from_bytes(b[i:], "little") ^ 0xFF00000000000000)
    return h


def feature_ids(field, tokens):
    """feature_id of every token; 8-byte tokens (Criteo's hex) vectorized."""
    ids = np.zeros(len(tokens), dtype=np.uint64)
    eight = [i for i, t in enumerate(tokens) if len(t.encode()) == 8]
    if eight:
        seed = mix64_int(0x7073747261696E00 + field)
        h0 = np.uint64(mix64_int(seed ^ ((8 * 0x9DDFEA08EB382D69) & M64)))
        words = np.frombuffer(b"".join(tokens[i].encode() for i in eight), dtype="<u8")
        ids[eight] = mix64(words ^ h0)
    done = set(eight)
    for i, t in enumerate(tokens):
        if i not in done:
            ids[i] = feature_id(field, t)
    return ids


def pstrain_uniform(seed, table_id, rows, dim, scale):
    """pstrain's deterministic U(-scale, scale) initializer (common/optim/
    initializer.cc) for `rows` (uint64 row keys: an index of a dense table, the
    feature id of a sparse row), `dim` columns each, in float32."""
    table_key = mix64_int(seed ^ mix64_int(0x7461626C65000000 ^ table_id))
    keys = mix64(np.asarray(rows, dtype=np.uint64) ^ np.uint64(table_key))
    with np.errstate(over="ignore"):
        bits = mix64(keys[:, None] + np.arange(dim, dtype=np.uint64)[None, :])
    unit = (bits >> np.uint64(40)).astype(np.float32) * np.float32(1.0 / 16777216.0)
    return (np.float32(2.0) * unit - np.float32(1.0)) * np.float32(scale)


def read_tsv(path, num_dense, num_sparse, vocab):
    labels, dense, sparse = [], [], []
    with open(path) as f:
        for line in f:
            cols = line.rstrip("\n").split("\t")
            labels.append(float(cols[0]))
            dense.append([float(c) if c else 0.0 for c in cols[1:1 + num_dense]])
            row = []
            for j, tok in enumerate(cols[1 + num_dense:1 + num_dense + num_sparse]):
                v = vocab[j]
                idx = v.get(tok)
                if idx is None:
                    idx = v[tok] = len(v)
                row.append(idx)
            sparse.append(row)
    d = np.log1p(np.maximum(np.asarray(dense, dtype=np.float64), 0.0)).astype(np.float32)
    return (torch.tensor(labels, dtype=torch.float32), torch.from_numpy(d),
            torch.tensor(sparse, dtype=torch.int64))


def mlp(widths, relu_last, zero_bias):
    layers = []
    for i in range(len(widths) - 1):
        lin = nn.Linear(widths[i], widths[i + 1])
        if zero_bias:
            nn.init.zeros_(lin.bias)
        layers.append(lin)
        if i + 2 < len(widths) or relu_last:
            layers.append(nn.ReLU())
    return nn.Sequential(*layers)


def init_like_pstrain(model, vocab, seed, zero_bias, embedding_scale=0.1, table_scales=None):
    """Sets every parameter to the value pstrain's servers give it for
    `pstrain train --seed=SEED --untrained_rows=init
    --embedding_init=uniform:EMBEDDING_SCALE` (--bias_init=zeros with
    zero_bias; tables in pstrain's order: bottom.i.{weight,bias},
    top.i.{weight,bias}, emb.C1..), so that both train from the same point."""
    table_id = 0
    for seq in (model.bottom, model.top):
        for layer in seq:
            if isinstance(layer, nn.Linear):
                out_f, in_f = layer.weight.shape
                scale = np.float32(1.0) / np.sqrt(np.float32(in_f))
                w = pstrain_uniform(seed, table_id, np.arange(out_f * in_f), 1, scale)
                layer.weight.data = torch.from_numpy(w.reshape(out_f, in_f).copy())
                if zero_bias:
                    nn.init.zeros_(layer.bias)
                else:
                    b = pstrain_uniform(seed, table_id + 1, np.arange(out_f), 1, scale)
                    layer.bias.data = torch.from_numpy(b.reshape(out_f).copy())
                table_id += 2
    for f, e in enumerate(model.emb):
        dim = e.weight.shape[1]
        tokens = sorted(vocab[f], key=vocab[f].get)
        ids = feature_ids(f, tokens)
        scale = table_scales[f] if table_scales else embedding_scale
        rows = pstrain_uniform(seed, table_id, ids, dim, np.float32(scale))
        if len(tokens) > 0:
            e.weight.data[:len(tokens)] = torch.from_numpy(rows)
        table_id += 1


class Dlrm(nn.Module):
    def __init__(self, num_dense, vocab_sizes, dim, bottom, top, zero_bias, embedding_init,
                 embedding_scale=0.0):
        super().__init__()
        self.bottom = mlp([num_dense] + bottom, True, zero_bias)
        self.emb = nn.ModuleList(nn.Embedding(n, dim, sparse=True) for n in vocab_sizes)
        for e in self.emb:
            if embedding_init == "uniform":
                bound = embedding_scale if embedding_scale > 0 else 1 / math.sqrt(dim)
                nn.init.uniform_(e.weight, -bound, bound)
            elif embedding_init == "normal" and embedding_scale > 0:
                nn.init.normal_(e.weight, 0.0, embedding_scale)
            elif embedding_init == "dlrm":  # facebookresearch/dlrm: U(+-sqrt(1 / rows))
                bound = math.sqrt(1 / e.num_embeddings)
                nn.init.uniform_(e.weight, -bound, bound)
        n = len(vocab_sizes) + 1
        self.li, self.lj = torch.tril_indices(n, n, offset=-1)
        self.top = mlp([dim + n * (n - 1) // 2] + top + [1], False, zero_bias)

    def forward(self, dense, sparse):
        x = self.bottom(dense)
        t = torch.stack([x] + [e(sparse[:, f]) for f, e in enumerate(self.emb)], dim=1)
        z = torch.bmm(t, t.transpose(1, 2))[:, self.li, self.lj]
        return self.top(torch.cat([x, z], dim=1)).squeeze(1)


def auc(labels, scores):
    order = np.argsort(scores, kind="mergesort")
    s = scores[order]
    ranks = np.empty(len(s))
    i = 0
    while i < len(s):  # average ranks over ties
        j = i
        while j + 1 < len(s) and s[j + 1] == s[i]:
            j += 1
        ranks[i:j + 1] = (i + j) / 2 + 1
        i = j + 1
    y = labels[order]
    pos = y.sum()
    neg = len(y) - pos
    return float((ranks[y == 1].sum() - pos * (pos + 1) / 2) / (pos * neg))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--train", required=True)
    ap.add_argument("--eval", required=True)
    ap.add_argument("--dense_fields", type=int, default=13)
    ap.add_argument("--sparse_fields", type=int, default=26)
    ap.add_argument("--embedding_dim", type=int, default=16)
    ap.add_argument("--bottom_mlp", default="64,16")
    ap.add_argument("--top_mlp", default="64,32")
    ap.add_argument("--batch_size", type=int, default=1024)
    ap.add_argument("--lr", type=float, default=0.05, help="embedding tables")
    ap.add_argument("--dense_lr", type=float, default=-1, help="MLPs (default lr / 5, as pstrain)")
    ap.add_argument("--eps", type=float, default=1e-8, help="Adagrad eps (pstrain's)")
    ap.add_argument("--zero_bias", action="store_true",
                    help="biases start at 0 (pstrain --bias_init=zeros)")
    ap.add_argument("--embedding_init", choices=["uniform", "normal", "dlrm"], default="uniform")
    ap.add_argument("--embedding_scale", type=float, default=0,
                    help="--embedding_init=uniform: U(+-this) (0: U(+-1/sqrt(dim))); "
                         "normal: N(0, this^2) (0: N(0, 1), nn.Embedding's own default)")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--init", choices=["torch", "pstrain"], default="torch",
                    help="pstrain: start from the exact values of `pstrain train --seed=SEED "
                         "--untrained_rows=init` (with --zero_bias: --bias_init=zeros)")
    ap.add_argument("--table_scales", default="",
                    help="--init=pstrain: U(+-S) per field, comma-separated (pstrain's table_init; "
                         "rows: U(+-sqrt(1/rows)) of each field's vocabulary)")
    a = ap.parse_args()
    torch.manual_seed(a.seed)
    torch.set_num_threads(1)
    vocab = [dict() for _ in range(a.sparse_fields)]
    start = time.time()
    ty, td, ts = read_tsv(a.train, a.dense_fields, a.sparse_fields, vocab)
    ey, ed, es = read_tsv(a.eval, a.dense_fields, a.sparse_fields, vocab)
    read_s = time.time() - start
    model = Dlrm(a.dense_fields, [max(1, len(v)) for v in vocab], a.embedding_dim,
                 [int(w) for w in a.bottom_mlp.split(",")], [int(w) for w in a.top_mlp.split(",")],
                 a.zero_bias, a.embedding_init, a.embedding_scale)
    if a.init == "pstrain":
        # pstrain's default --embedding_init=uniform:0.1, or --embedding_scale's.
        scales = None
        if a.table_scales == "rows":
            scales = [math.sqrt(1 / max(1, len(v))) for v in vocab]
        elif a.table_scales:
            scales = [float(x) for x in a.table_scales.split(",")]
        init_like_pstrain(model, vocab, a.seed, a.zero_bias, a.embedding_scale or 0.1, scales)
    dense_lr = a.dense_lr if a.dense_lr >= 0 else a.lr / 5
    sparse_opt = torch.optim.Adagrad(model.emb.parameters(), lr=a.lr, eps=a.eps)
    dense_params = list(model.bottom.parameters()) + list(model.top.parameters())
    dense_opt = torch.optim.Adagrad(dense_params, lr=dense_lr, eps=a.eps)
    loss_fn = nn.BCEWithLogitsLoss()  # mean over the batch
    start = time.time()
    model.train()
    for b in range(0, len(ty), a.batch_size):
        sl = slice(b, b + a.batch_size)
        sparse_opt.zero_grad()
        dense_opt.zero_grad()
        loss = loss_fn(model(td[sl], ts[sl]), ty[sl])
        loss.backward()
        sparse_opt.step()
        dense_opt.step()
    train_s = time.time() - start
    model.eval()
    with torch.no_grad():
        logits = torch.cat([model(ed[b:b + 8192], es[b:b + 8192]) for b in range(0, len(ey), 8192)])
    p = torch.sigmoid(logits).double().clamp(1e-7, 1 - 1e-7).numpy()
    y = ey.double().numpy()
    logloss = float(-np.mean(y * np.log(p) + (1 - y) * np.log(1 - p)))
    print(json.dumps({"framework": "pytorch", "torch": torch.__version__, "model": "dlrm",
                      "eval_auc": round(auc(y, p), 5), "eval_logloss": round(logloss, 5),
                      "train_rows": len(ty), "lr": a.lr, "dense_lr": dense_lr,
                      "zero_bias": a.zero_bias, "init": a.init, "seed": a.seed,
                      "samples_per_sec": round(len(ty) / train_s), "read_s": round(read_s, 1)}))


if __name__ == "__main__":
    sys.exit(main())
