#!/usr/bin/python3
"""DIN in PyTorch, the network of examples/models/din.json, for speed per core.

Reads `pstrain gen --history=L` CSV (clicked, age, price, user, item,
category, history, history_category), gives each token an exact id (the
history shares the item's table, the history's categories the category's, as
the schema's "ids_like" does), pads each row's history to the batch's
longest (the usual PyTorch layout; the mask keeps padding out), and times
training steps at --batch_size on one thread: forward + backward alone (what
`pstrain_bench train --mode=local` times) and with Adagrad's update
(sparse rows for the embeddings, as pstrain's servers update them). The
network: embeddings of 16; DIN's attention unit over [h, t, h - t, h * t]
(Linear 64 -> 36, ReLU, Linear 36 -> 1), the score-weighted sum of the
history (no softmax), for the items against the candidate item and for their
categories against its category; a bottom Linear 2 -> 16 + ReLU over the
log1p'd dense columns; the top MLP 96 -> 64 -> 32 -> 1 over [item interest,
category interest, item, category, user, bottom]. Prints one JSON line.

Needs Debian's python3-torch (bench/torch_setup.sh); never needed by
`make test`.
"""
import argparse
import csv
import json
import math
import time

import torch
from torch import nn


def read(path, max_rows):
    vocab = {"user": {}, "item": {}, "category": {}}

    def vid(table, token):
        v = vocab[table]
        return v.setdefault(token, len(v))

    labels, dense, user, item, cat, hist, hist_cat = [], [], [], [], [], [], []
    with open(path) as f:
        for row in csv.DictReader(f):
            labels.append(float(row["clicked"]))
            dense.append([math.log1p(float(row["age"])), math.log1p(float(row["price"]))])
            user.append(vid("user", row["user"]))
            item.append(vid("item", row["item"]))
            cat.append(vid("category", row["category"]))
            hist.append([vid("item", t) for t in row["history"].split("|")])
            hist_cat.append([vid("category", t) for t in row["history_category"].split("|")])
            if len(labels) >= max_rows:
                break
    return (labels, dense, user, item, cat, hist, hist_cat), {k: len(v) for k, v in vocab.items()}


def padded(seqs):
    longest = max(len(s) for s in seqs)
    ids = torch.zeros(len(seqs), longest, dtype=torch.int64)
    mask = torch.zeros(len(seqs), longest)
    for r, s in enumerate(seqs):
        ids[r, :len(s)] = torch.tensor(s)
        mask[r, :len(s)] = 1
    return ids, mask


def batches(data, batch_size):
    labels, dense, user, item, cat, hist, hist_cat = data
    out = []
    for b in range(0, len(labels) - batch_size + 1, batch_size):
        s = slice(b, b + batch_size)
        h, hm = padded(hist[s])
        hc, hcm = padded(hist_cat[s])
        out.append((torch.tensor(labels[s]), torch.tensor(dense[s]), torch.tensor(user[s]),
                    torch.tensor(item[s]), torch.tensor(cat[s]), h, hm, hc, hcm))
    return out


class Attention(nn.Module):
    def __init__(self, dim, width=36):
        super().__init__()
        self.score = nn.Sequential(nn.Linear(4 * dim, width), nn.ReLU(), nn.Linear(width, 1))

    def forward(self, items, mask, target):  # [B, L, d], [B, L], [B, d]
        t = target.unsqueeze(1).expand_as(items)
        s = self.score(torch.cat([items, t, items - t, items * t], dim=-1)).squeeze(-1) * mask
        return (s.unsqueeze(-1) * items).sum(dim=1)


class Din(nn.Module):
    def __init__(self, sizes, dim=16):
        super().__init__()
        self.user = nn.Embedding(sizes["user"], dim, sparse=True)
        self.item = nn.Embedding(sizes["item"], dim, sparse=True)
        self.category = nn.Embedding(sizes["category"], dim, sparse=True)
        for e in (self.user, self.item, self.category):
            nn.init.uniform_(e.weight, -1 / math.sqrt(dim), 1 / math.sqrt(dim))
        self.item_interest = Attention(dim)
        self.category_interest = Attention(dim)
        self.bottom = nn.Sequential(nn.Linear(2, 16), nn.ReLU())
        self.top = nn.Sequential(nn.Linear(6 * dim, 64), nn.ReLU(), nn.Linear(64, 32), nn.ReLU(),
                                 nn.Linear(32, 1))

    def forward(self, dense, user, item, cat, h, hm, hc, hcm):
        i, c = self.item(item), self.category(cat)
        x = torch.cat([self.item_interest(self.item(h), hm, i),
                       self.category_interest(self.category(hc), hcm, c),
                       i, c, self.user(user), self.bottom(dense)], dim=1)
        return self.top(x).squeeze(1)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", required=True)
    ap.add_argument("--batch_size", type=int, default=1024)
    ap.add_argument("--rows", type=int, default=65536, help="rows read (batches cycled)")
    ap.add_argument("--seconds", type=float, default=10)
    ap.add_argument("--lr", type=float, default=0.05)
    a = ap.parse_args()
    torch.set_num_threads(1)
    torch.manual_seed(1)
    data, sizes = read(a.data, a.rows)
    bs = batches(data, a.batch_size)
    model = Din(sizes)
    sparse = [model.user.weight, model.item.weight, model.category.weight]
    dense = [p for n, p in model.named_parameters() if all(p is not s for s in sparse)]
    opts = [torch.optim.Adagrad(sparse, lr=a.lr), torch.optim.Adagrad(dense, lr=a.lr)]
    loss_fn = nn.BCEWithLogitsLoss(reduction="sum")
    result = {"bench": "torch_din", "batch_size": a.batch_size, "torch": torch.__version__,
              "threads": torch.get_num_threads(), "rows": len(data[0])}

    def run(update):
        steps = 0
        for b in bs[:2]:  # warm-up
            loss_fn(model(*b[1:]), b[0]).backward()
        t0 = time.perf_counter()
        cpu0 = time.process_time()
        while time.perf_counter() - t0 < a.seconds:
            b = bs[steps % len(bs)]
            for o in opts:
                o.zero_grad()
            loss_fn(model(*b[1:]), b[0]).backward()
            if update:
                for o in opts:
                    o.step()
            steps += 1
        wall = time.perf_counter() - t0
        return steps * a.batch_size / wall, (time.process_time() - cpu0) / (steps * a.batch_size)

    sps, cpu = run(update=False)
    result["forward_backward_samples_per_sec"] = round(sps, 1)
    result["forward_backward_cpu_us_per_sample"] = round(cpu * 1e6, 2)
    sps, cpu = run(update=True)
    result["with_adagrad_samples_per_sec"] = round(sps, 1)
    result["with_adagrad_cpu_us_per_sample"] = round(cpu * 1e6, 2)
    print(json.dumps(result))


if __name__ == "__main__":
    main()
